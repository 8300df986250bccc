"""Tiny models of GLM-4 dense (planner.archs.glm4): pre- and post-norms around attention and FFN, a fused
gate/up FFN, multi-token-prediction layers loaded by name and skipped."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, fused_ffn, nextn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    out = norm(spec, il, "attn_norm") + attention(spec, il) + norm(spec, il, "post_attention_norm")
    out += norm(spec, il, "ffn_norm") + fused_ffn(spec, il) + norm(spec, il, "post_ffw_norm")
    if il >= spec.n_layer - spec.count("nextn_predict_layers", 0):
        out += nextn(spec, il)
    return out


ZOO: dict[str, TinySpec] = {
    "glm4": TinySpec("glm4", n_layer=5, n_head_kv=2, weight_type=Q.Q8_0, extra_kv={"glm4.nextn_predict_layers": 1}),
    # variants along the axes real releases differ in
    "glm4-0414-bias": TinySpec(  # GLM-4-9B-0414: Q/K/V biases, half of each head rotated, no MTP layer
        "glm4",
        n_head_kv=1,
        optional=("qkv_bias",),
        extra_kv={"glm4.rope.dimension_count": 16},
        covers=("Q/K/V biases", "partial RoPE", "no MTP layer", "MQA"),
    ),
    "glm41v-mrope-tied": TinySpec(  # GLM-4.1V: multi-section RoPE
        "glm4",
        n_head_kv=4,
        output_type=None,
        extra_kv={"glm4.rope.dimension_sections": [8, 4, 4, 0]},
        covers=("multi-section RoPE", "MHA", "tied"),
    ),
}
