"""Tiny models of Llama 4 (planner.archs.llama4): experts every n-th layer, with a shared expert as wide as
one of them."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, experts, gated_ffn, norm, output_norm, shared_expert

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    step = spec.count("interleave_moe_layer_step", 1)
    dense = step == 0 or (il + 1) % step
    ffn = gated_ffn(spec, il) if dense else experts(spec, il, spec.n_ff_exp) + shared_expert(spec, il, spec.n_ff_exp)
    return norm(spec, il, "attn_norm") + attention(spec, il) + norm(spec, il, "ffn_norm") + ffn


ZOO: dict[str, TinySpec] = {
    # Llama 4 Scout's shape in small: 3 of 4 layers chunked (8,192 tokens), every 2nd layer routed (1 of 4
    # experts) with a shared expert; head size 64 so that CUDA runs its flash attention
    "llama4": TinySpec(
        "llama4",
        n_layer=8,
        n_head=2,
        n_head_kv=1,
        n_expert=4,
        n_expert_used=1,
        n_ff_exp=64,
        n_ctx_train=32768,
        weight_type=Q.Q8_0,
        extra_kv={"llama4.interleave_moe_layer_step": 2},
    ),
    # variants along the axes real releases differ in
    "llama4-scout-every-layer": TinySpec(  # Scout: 16 experts on every layer; RoPE factors; 7 layers
        "llama4",
        n_layer=7,
        n_head=4,
        n_head_kv=1,
        n_expert=16,
        n_expert_used=1,
        n_ff_exp=32,
        n_ctx_train=32768,
        optional=("rope_freqs",),
        extra_kv={"llama4.interleave_moe_layer_step": 1},
        covers=("experts on every layer", "16 experts", "rope_freqs", "layers not a multiple of the pattern"),
    ),
    "llama4-maverick-128e": TinySpec(  # Maverick: 128 experts every other layer, no Q/K norm, tied here
        "llama4",
        n_layer=4,
        n_head=2,
        n_head_kv=1,
        n_expert=128,
        n_expert_used=1,
        n_ff_exp=16,
        n_ctx_train=32768,
        output_type=None,
        extra_kv={"llama4.interleave_moe_layer_step": 2},
        covers=("128 experts (no Q/K norm)", "tied"),
    ),
    "llama4-no-chunk": TinySpec(  # a window of 0: no chunked attention, RoPE on all but the last layer
        "llama4",
        n_layer=4,
        n_head=4,
        n_head_kv=4,
        n_expert=4,
        n_expert_used=2,
        n_ff_exp=32,
        extra_kv={"llama4.interleave_moe_layer_step": 2, "llama4.attention.sliding_window": 0},
        covers=("no chunked attention (window 0)", "MHA", "2 experts used"),
    ),
    "llama4-chunk-array": TinySpec(
        "llama4",
        n_layer=5,
        n_head=2,
        n_head_kv=1,
        n_expert=4,
        n_expert_used=1,
        n_ff_exp=32,
        extra_kv={
            "llama4.interleave_moe_layer_step": 1,
            "llama4.attention.sliding_window_pattern": [True, False, True, True, True],
        },
        covers=("explicit per-layer chunk array", "last layer chunked"),
    ),
}
