"""Tiny models of Nanbeige (planner.archs.nanbeige): llama's layers, once or looped."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    return norm(spec, il, "attn_norm") + attention(spec, il) + norm(spec, il, "ffn_norm") + gated_ffn(spec, il)


ZOO: dict[str, TinySpec] = {
    # Nanbeige 4's dense shape in small: grouped-query attention, untied output
    "nanbeige": TinySpec("nanbeige", n_head_kv=2, weight_type=Q.Q8_0),
    # the looped release: 3 physical layers run 3 times (9 KV caches), the output norm between passes
    "nanbeige-looped": TinySpec(
        "nanbeige", n_layer=3, n_head_kv=2, weight_type=Q.Q8_0, extra_kv={"nanbeige.num_loops": 3}, name="tiny-looped"
    ),
}
