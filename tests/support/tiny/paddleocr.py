"""Tiny models of PaddleOCR-VL's text model (planner.archs.paddleocr): ERNIE 4.5's dense layers."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    return norm(spec, il, "attn_norm") + attention(spec, il) + norm(spec, il, "ffn_norm") + gated_ffn(spec, il)


ZOO: dict[str, TinySpec] = {
    # PaddleOCR-VL 0.9B's shape: grouped-query attention, tied output, M-RoPE sections
    "paddleocr": TinySpec(
        "paddleocr",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={"paddleocr.rope.dimension_sections": [8, 4, 4, 0]},
    ),
}
