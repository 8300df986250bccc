"""Tiny models of Maple (planner.archs.maple): Q/K norms and routed experts on every layer, in
llama_model_maple::load_arch_tensors' order."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attn_output, norm, output_norm, qkv

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p, ne, fe = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}.", spec.n_expert, spec.n_ff_exp
    return [
        *norm(spec, il, "attn_norm"),
        *qkv(spec, il),
        *attn_output(spec, il),
        (p + "attn_q_norm.weight", (hk,), Q.F32),
        (p + "attn_k_norm.weight", (hk,), Q.F32),
        *norm(spec, il, "ffn_norm"),
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
    ]


ZOO: dict[str, TinySpec] = {
    # SWA-512-like windows on 3 of every 4 layers (an explicit per-layer pattern), 8 experts, 2 used
    "maple": TinySpec(
        "maple",
        n_layer=4,
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_swa=128,
        extra_kv={
            "maple.attention.sliding_window_pattern": [True, True, True, False],
            "maple.swiglu_clamp_exp": 7.0,
        },
    ),
}
