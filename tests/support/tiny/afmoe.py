"""Tiny models of AFMoE, Arcee's Trinity (planner.archs.afmoe): sandwich norms, a gated attention, a
dense leading layer, then experts with a selection bias and a shared expert."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    out = norm(spec, il, "attn_norm") + norm(spec, il, "post_attention_norm") + attention(spec, il)
    out += [
        (p + "attn_q_norm.weight", (hk,), Q.F32),
        (p + "attn_k_norm.weight", (hk,), Q.F32),
        (p + "attn_gate.weight", (e, hk * spec.n_head), w),
    ]
    out += norm(spec, il, "ffn_norm") + norm(spec, il, "post_ffw_norm")
    if il < spec.count("leading_dense_block_count", 0):
        ff = spec.n_ff
        return out + [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
            (p + "ffn_up.weight", (e, ff), w),
        ]
    ne, fe = spec.n_expert, spec.n_ff_exp
    fs = fe * spec.count("expert_shared_count")
    return out + [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "exp_probs_b.bias", (ne,), Q.F32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_gate_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
    ]


ZOO: dict[str, TinySpec] = {
    # Trinity's shape in small: a window on 3 of 4 layers, one dense leading layer, 8 experts (2 used,
    # sigmoid by default) with a normalised, scaled weighting, one shared expert; tied output
    "afmoe": TinySpec(
        "afmoe",
        n_layer=5,
        n_head_kv=2,
        n_swa=128,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={
            "afmoe.leading_dense_block_count": 1,
            "afmoe.expert_shared_count": 1,
            "afmoe.expert_weights_norm": True,
            "afmoe.expert_weights_scale": 2.826,
        },
    ),
}
