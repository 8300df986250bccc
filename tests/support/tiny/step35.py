"""Tiny models of Step 3.5 (planner.archs.step35): per-layer heads, Q/K norms, a per-head attention
gate, a dense first layer, then experts plus a shared expert, SwiGLU limits; one MTP layer skipped."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, nextn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    nh = spec.q_heads[il] if spec.q_heads else spec.n_head
    kv = spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    out = norm(spec, il, "attn_norm") + [
        (p + "attn_q_norm.weight", (hk,), Q.F32),
        (p + "attn_k_norm.weight", (hk,), Q.F32),
        (p + "attn_q.weight", (e, hk * nh), w),
        (p + "attn_k.weight", (e, hk * kv), w),
        (p + "attn_v.weight", (e, hk * kv), w),
        (p + "attn_output.weight", (hk * nh, e), w),
        (p + "attn_gate.weight", (e, nh), w),
        *norm(spec, il, "ffn_norm"),
    ]
    if il == 0:
        ff = spec.n_ff
        out += [(p + "ffn_gate.weight", (e, ff), w), (p + "ffn_down.weight", (ff, e), w)]
        out.append((p + "ffn_up.weight", (e, ff), w))
    else:
        ne, fe, fs = spec.n_expert, spec.n_ff_exp, spec.n_ff_shexp
        out += [
            (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "exp_probs_b.bias", (ne,), Q.F32),
            (p + "ffn_gate_shexp.weight", (e, fs), w),
            (p + "ffn_up_shexp.weight", (e, fs), w),
            (p + "ffn_down_shexp.weight", (fs, e), w),
        ]
    return out + nextn(spec, il) if il >= spec.n_layer - spec.count("nextn_predict_layers", 0) else out


ZOO: dict[str, TinySpec] = {
    # Step-3.5-Flash's shape in small: a window on 3 of 4 layers (named by an array), the global layers
    # with more heads, a dense first layer, 8 experts (2 used) plus a shared expert, SwiGLU limits on
    # the experts and the shared expert of some layers, one multi-token-prediction layer
    "step35": TinySpec(
        "step35",
        n_layer=5,
        head_dim=32,
        q_heads=(8, 4, 4, 8, 4),
        kv_heads=(4, 2, 2, 4, 2),
        n_swa=128,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "step35.attention.sliding_window_pattern": [False, True, True, False, True],
            "step35.nextn_predict_layers": 1,
            "step35.expert_weights_norm": True,
            "step35.expert_weights_scale": 3.0,
            "step35.swiglu_clamp_exp": [0.0, 7.0, 0.0, 7.0, 7.0],
            "step35.swiglu_clamp_shexp": [7.0, 0.0, 7.0, 7.0, 0.0],
        },
    ),
}
