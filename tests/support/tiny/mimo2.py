"""Tiny models of MiMo-V2 (planner.archs.mimo2): per-layer heads, sinks, a dense first layer, then
sigmoid-routed experts; a multi-token-prediction layer (dense, fused QKV) skipped."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, nextn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    nh = spec.q_heads[il] if spec.q_heads else spec.n_head
    kv = spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    mtp = il >= spec.n_layer - spec.count("nextn_predict_layers", 0)
    if mtp:  # the draft head wants a fused QKV
        qkv: Shapes = [(p + "attn_qkv.weight", (e, hk * (nh + 2 * kv)), w)]
    else:
        qkv = [(p + "attn_q.weight", (e, hk * nh), w), (p + "attn_k.weight", (e, hk * kv), w)]
        qkv.append((p + "attn_v.weight", (e, hk * kv), w))
    out = qkv + [(p + "attn_output.weight", (hk * nh, e), w)] + norm(spec, il, "attn_norm")
    out += [(p + "attn_sinks.weight", (nh,), Q.F32)] + norm(spec, il, "ffn_norm")
    if il == 0 or mtp:
        ff = spec.n_ff
        out += [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
            (p + "ffn_up.weight", (e, ff), w),
        ]
    else:
        ne, fe = spec.n_expert, spec.n_ff_exp
        out += [
            (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "exp_probs_b.bias", (ne,), Q.F32),
        ]
    return out + nextn(spec, il) if mtp else out


ZOO: dict[str, TinySpec] = {
    # MiMo-V2-Flash's shape in small: windowed layers named by an array (the first and fourth global, with
    # more KV heads), sinks, a value scale, a dense first layer, 8 experts (2 used), one MTP layer
    "mimo2": TinySpec(
        "mimo2",
        n_layer=5,
        head_dim=32,
        q_heads=(4, 4, 4, 4, 4),
        kv_heads=(4, 2, 2, 4, 2),
        n_swa=128,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "mimo2.attention.sliding_window_pattern": [False, True, True, False, True],
            "mimo2.attention.value_scale": 0.707,
            "mimo2.nextn_predict_layers": 1,
        },
    ),
}
