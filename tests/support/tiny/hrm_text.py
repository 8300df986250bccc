"""Tiny models of HRM-Text (planner.archs.hrm_text): the L and H stacks' weights (blocks 0 and 1 for one
layer a stack), no norm weights; the other blocks of the header are slots without tensors."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    if il >= 2 * spec.count("hrm.layers_per_stack"):
        return []
    e, w, ff, p = spec.n_embd, spec.weight_type, spec.n_ff, f"blk.{il}."
    gate: Shapes = [(p + "attn_gate.weight", (e, spec.head_k * spec.n_head), w)]
    attn = attention(spec, il)
    return (
        attn[:3]
        + gate
        + attn[3:]
        + [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
            (p + "ffn_up.weight", (e, ff), w),
        ]
    )


def global_tensors(spec: TinySpec) -> Shapes:
    return [("hrm.z_l_init", (spec.n_embd,), Q.F32)]


ZOO: dict[str, TinySpec] = {
    # one layer a stack, 2 H cycles of 2 L cycles: 6 slots (6 KV caches) over 2 blocks of weights
    "hrm_text": TinySpec(
        "hrm_text",
        n_layer=6,
        n_head_kv=2,
        weight_type=Q.Q8_0,
        extra_kv={
            "hrm_text.hrm.layers_per_stack": 1,
            "hrm_text.hrm.h_cycles": 2,
            "hrm_text.hrm.l_cycles": 2,
            "hrm_text.embedding_scale": 39.2,
        },
    ),
}
