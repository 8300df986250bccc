"""Tiny models of OLMo 1 (planner.archs.olmo): layer norms without weights or biases, so no norm tensor
at all."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    return attention(spec, il) + gated_ffn(spec, il)


def global_tensors(spec: TinySpec) -> Shapes:
    return []


ZOO: dict[str, TinySpec] = {
    # weightless layer norms, Q/K/V clamped (attention.clamp_kqv)
    "olmo": TinySpec(
        "olmo",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        extra_kv={"olmo.attention.layer_norm_epsilon": 1e-5, "olmo.attention.clamp_kqv": 8.0},
    ),
    # variants along the axes real releases differ in
    "olmo-tied-no-clamp": TinySpec(  # OLMo 1B: tied, no Q/K/V clamp
        "olmo",
        n_head_kv=4,
        output_type=None,
        extra_kv={"olmo.attention.layer_norm_epsilon": 1e-5},
        covers=("tied", "no clamp", "MHA"),
    ),
}
