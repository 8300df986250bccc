"""Tiny models of the 2024 mixture-of-experts decoders (planner.archs.moe_decoders): DeepSeek V1, Arctic,
DBRX and Grok, each in its loader's order."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, attn_output, fused_qkv, gated_ffn, norm, output_norm

global_tensors = output_norm


def _experts(spec: TinySpec, il: int, fe: int, gate_inp: bool = True) -> Shapes:
    """The router, then gate, down and up experts (the order these loaders create them in)."""
    e, w, p, ne = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_expert
    out: Shapes = [(p + "ffn_gate_inp.weight", (e, ne), Q.F32)] if gate_inp else []
    return out + [
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
    ]


def _gate_down_up(spec: TinySpec, il: int, ff: int | None = None) -> Shapes:
    gate, up, down = gated_ffn(spec, il, ff)
    return [gate, down, up]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    a, e, p = spec.arch, spec.n_embd, f"blk.{il}."
    if a == "dbrx":
        return [
            *norm(spec, il, "attn_norm"),
            *fused_qkv(spec, il),
            *attn_output(spec, il),
            *norm(spec, il, "attn_output_norm"),
            *_experts(spec, il, spec.n_ff),
        ]
    out = norm(spec, il, "attn_norm") + attention(spec, il)
    if a == "grok":
        out += norm(spec, il, "attn_output_norm") + norm(spec, il, "ffn_norm")
        if "dense" in spec.name.split():
            out += _gate_down_up(spec, il)
        return out + _experts(spec, il, spec.n_ff_exp or spec.n_ff) + norm(spec, il, "layer_output_norm")
    out += norm(spec, il, "ffn_norm")
    if a == "arctic":
        router = (p + "ffn_gate_inp.weight", (e, spec.n_expert), Q.F32)
        return (
            out
            + _gate_down_up(spec, il, e)
            + [router, *norm(spec, il, "ffn_norm_exps")]
            + _experts(spec, il, spec.n_ff, gate_inp=False)
        )
    # deepseek
    if il < spec.count("leading_dense_block_count", 0):
        return out + _gate_down_up(spec, il)
    fs = spec.n_ff_exp * spec.count("expert_shared_count")
    w = spec.weight_type
    shared: Shapes = [
        (p + "ffn_gate_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
    ]
    return out + _experts(spec, il, spec.n_ff_exp) + shared


ZOO: dict[str, TinySpec] = {
    # DeepSeek MoE 16B's shape: one dense layer, 8 routed experts and two shared ones
    "deepseek": TinySpec(
        "deepseek",
        n_head_kv=4,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=32,
        output_type=None,
        extra_kv={
            "deepseek.leading_dense_block_count": 1,
            "deepseek.expert_shared_count": 2,
            "deepseek.expert_weights_scale": 1.0,
        },
    ),
    "arctic": TinySpec("arctic", n_head_kv=4, n_expert=8, n_expert_used=2, n_ff=64),
    "dbrx": TinySpec(
        "dbrx",
        n_head_kv=2,
        n_expert=4,
        n_expert_used=2,
        n_ff=64,
        extra_kv={"dbrx.attention.layer_norm_epsilon": 1e-5, "dbrx.attention.clamp_kqv": 8.0},
    ),
    # Grok 1: experts only, soft-capped attention logits
    "grok": TinySpec("grok", n_head_kv=2, n_expert=8, n_expert_used=2, n_ff=64, output_type=None),
    # Grok 2: a dense FFN beside the experts, soft-capped final logits
    "grok-dense": TinySpec(
        "grok",
        n_head_kv=2,
        n_expert=4,
        n_expert_used=2,
        n_ff_exp=64,
        name="tiny grok dense",
        extra_kv={"grok.final_logit_softcapping": 50.0, "grok.logit_scale": 0.5},
    ),
}
