"""Tiny models of Llama as a text encoder (planner.archs.llama_embed): llama's layers."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    return norm(spec, il, "attn_norm") + attention(spec, il) + norm(spec, il, "ffn_norm") + gated_ffn(spec, il)


ZOO: dict[str, TinySpec] = {
    # a bidirectional Llama embedding model's shape, grouped-query attention, tied output
    "llama-embed": TinySpec(
        "llama-embed",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={"llama-embed.attention.causal": False, "llama-embed.pooling_type": 1},
    ),
}
