"""Tiny models of Llama 4 (planner.archs.llama4): experts every n-th layer, with a shared expert as wide as
one of them."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, experts, gated_ffn, norm, output_norm, shared_expert

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    dense = (il + 1) % spec.count("interleave_moe_layer_step", 1)
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
}
