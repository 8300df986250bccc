"""Tiny models of Qwen3-VL's text model (planner.archs.qwen3vl): qwen3 or qwen3moe with deepstack layers
and multi-section RoPE."""

from __future__ import annotations

from tests.support.tiny.common import Shapes, TinySpec, experts, gated_ffn, norm, output_norm, qk_norm_attention

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    out = norm(spec, il, "attn_norm") + qk_norm_attention(spec, il) + norm(spec, il, "ffn_norm")
    if spec.n_expert:  # qwen3vlmoe
        return out + experts(spec, il, spec.n_ff_exp or spec.n_ff)
    return out + gated_ffn(spec, il)


ZOO: dict[str, TinySpec] = {
    "qwen3vl": TinySpec(
        "qwen3vl",
        n_head=4,
        n_head_kv=2,
        head_dim=32,
        extra_kv={"qwen3vl.n_deepstack_layers": 2, "qwen3vl.rope.dimension_sections": [8, 4, 4, 0]},
    ),
    "qwen3vlmoe": TinySpec(
        "qwen3vlmoe",
        n_head=4,
        n_head_kv=2,
        head_dim=32,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        extra_kv={"qwen3vlmoe.n_deepstack_layers": 3, "qwen3vlmoe.rope.dimension_sections": [8, 4, 4, 0]},
    ),
    # Qwen3-TTS's talker: the loader wants an output matrix 3,072 wide, so the vocabulary is that size
    "qwen3tts": TinySpec(
        "qwen3tts",
        n_head=4,
        n_head_kv=2,
        head_dim=32,
        n_vocab=3072,
        extra_kv={"qwen3tts.rope.dimension_sections": [8, 4, 4, 0]},
    ),
    # variants along the axes real releases differ in
    "qwen3vl-tied-3-deepstack": TinySpec(  # Qwen3-VL-2B: tied, three deepstack layers, GQA 2:1
        "qwen3vl",
        n_head=4,
        n_head_kv=2,
        output_type=None,
        extra_kv={"qwen3vl.n_deepstack_layers": 3, "qwen3vl.rope.dimension_sections": [8, 4, 4, 0]},
        covers=("tied", "3 deepstack layers", "head size = n_embd / n_head"),
    ),
    "qwen3vlmoe-128e-mqa": TinySpec(  # Qwen3-VL-30B-A3B: 128 experts, 8 used
        "qwen3vlmoe",
        n_head=8,
        n_head_kv=1,
        head_dim=32,
        n_expert=128,
        n_expert_used=8,
        n_ff_exp=16,
        extra_kv={"qwen3vlmoe.n_deepstack_layers": 2, "qwen3vlmoe.rope.dimension_sections": [8, 4, 4, 0]},
        covers=("128 experts, 8 used", "GQA 8:1", "query width != n_embd"),
    ),
}
