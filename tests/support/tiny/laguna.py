"""Tiny models of Laguna (planner.archs.laguna): per-layer heads, a softplus-gated attention, a dense
leading layer, then experts with a selection bias and a shared expert."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, norm, output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    nh = spec.q_heads[il] if spec.q_heads else spec.n_head
    kv = spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    gate = hk * nh if spec.name.endswith("per-value-gate") else nh  # the loader takes either width
    out = norm(spec, il, "attn_norm") + [
        (p + "attn_q.weight", (e, hk * nh), w),
        (p + "attn_k.weight", (e, hk * kv), w),
        (p + "attn_v.weight", (e, hk * kv), w),
        (p + "attn_output.weight", (hk * nh, e), w),
        (p + "attn_q_norm.weight", (hk,), Q.F32),
        (p + "attn_k_norm.weight", (hk,), Q.F32),
        (p + "attn_gate.weight", (e, gate), w),
        *norm(spec, il, "ffn_norm"),
    ]
    if il < spec.count("leading_dense_block_count"):
        ff = spec.n_ff
        return out + [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
        ]
    ne, fe, fs = spec.n_expert, spec.n_ff_exp, spec.n_ff_shexp or spec.n_ff_exp
    return out + [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "exp_probs_b.bias", (ne,), Q.F32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_gate_shexp.weight", (e, fs), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
    ]


global_tensors = output_norm

_LAGUNA = TinySpec(
    "laguna",
    n_layer=5,
    head_dim=32,
    q_heads=(4, 4, 4, 4, 8),
    kv_heads=(2, 2, 2, 2, 4),
    n_swa=128,
    n_expert=8,
    n_expert_used=2,
    n_ff_exp=64,
    weight_type=Q.Q8_0,
    output_type=None,
    extra_kv={
        "laguna.leading_dense_block_count": 1,
        "laguna.expert_weights_norm": True,
        "laguna.expert_weights_scale": 2.5,
    },
)

ZOO: dict[str, TinySpec] = {
    # Laguna XS.2's shape in small: a window on 3 of 4 layers (the first of each four global), per-head
    # gates, one dense leading layer, 8 sigmoid-routed experts (2 used) plus a shared expert; the last
    # layer with more heads
    "laguna": _LAGUNA,
    # no window, a gate per value rather than per head, a wider shared expert
    "laguna-dense-attn": _LAGUNA.with_(n_swa=0, n_ff_shexp=96, name="tiny-laguna-per-value-gate"),
}
