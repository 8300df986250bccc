"""Tiny models of Spark 2.5 (planner.archs.spark2_5): per-layer heads, a per-head attention gate."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    nh = spec.q_heads[il] if spec.q_heads else spec.n_head
    kv = spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    ff = spec.n_ff
    return norm(spec, il, "attn_norm") + [
        (p + "attn_q.weight", (e, hk * nh), w),
        (p + "attn_k.weight", (e, hk * kv), w),
        (p + "attn_v.weight", (e, hk * kv), w),
        (p + "attn_gate.weight", (e, nh), w),
        (p + "attn_output.weight", (hk * nh, e), w),
        *norm(spec, il, "ffn_norm"),
        (p + "ffn_gate.weight", (e, ff), w),
        (p + "ffn_up.weight", (e, ff), w),
        (p + "ffn_down.weight", (ff, e), w),
    ]


ZOO: dict[str, TinySpec] = {
    # windowed layers named by an array (the last one global), the global layers with more heads
    "spark2_5": TinySpec(
        "spark2_5",
        n_layer=5,
        head_dim=32,
        q_heads=(4, 4, 8, 4, 8),
        kv_heads=(2, 2, 4, 2, 4),
        n_swa=128,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={"spark2_5.attention.sliding_window_pattern": [True, True, False, True, False]},
    ),
}
