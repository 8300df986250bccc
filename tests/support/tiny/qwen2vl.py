"""Tiny models of Qwen2-VL's text model (planner.archs.qwen2vl): qwen2 with multi-section RoPE."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, biased_attention, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    attn = norm(spec, il, "attn_norm") + biased_attention(spec, il)
    return attn + norm(spec, il, "ffn_norm") + gated_ffn(spec, il)


ZOO: dict[str, TinySpec] = {
    # qwen2 with multi-section RoPE (four positions a token)
    "qwen2vl": TinySpec(
        "qwen2vl", n_head_kv=2, weight_type=Q.Q8_0, extra_kv={"qwen2vl.rope.dimension_sections": [8, 4, 4, 0]}
    ),
    # variants along the axes real releases differ in
    "qwen2vl-tied-gqa6": TinySpec(  # Qwen2-VL-2B: 12 heads over 2, tied
        "qwen2vl",
        n_embd=192,
        n_head=6,
        n_head_kv=1,
        output_type=None,
        extra_kv={"qwen2vl.rope.dimension_sections": [8, 4, 4, 0]},
        covers=("GQA 6:1", "tied"),
    ),
}
