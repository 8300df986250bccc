"""Tiny models of GLM-4.5 (planner.archs.glm4moe): attention with biases, post_attention_norm before the
FFN, dense leading layers, then sigmoid-routed experts with a selection bias and an ungated shared expert."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import (
    Shapes,
    TinySpec,
    biased_attention,
    gated_ffn,
    nextn,
    norm,
    output_norm,
    shared_expert,
)

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    out = norm(spec, il, "attn_norm") + biased_attention(spec, il) + norm(spec, il, "post_attention_norm")
    if il < spec.count("leading_dense_block_count", 0):
        return out + gated_ffn(spec, il)
    e, w, ne, fe, p = spec.n_embd, spec.weight_type, spec.n_expert, spec.n_ff_exp, f"blk.{il}."
    out += [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "exp_probs_b.bias", (ne,), Q.F32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        *shared_expert(spec, il, spec.n_ff_shexp),
    ]
    if il >= spec.n_layer - spec.count("nextn_predict_layers", 0):  # GLM-4.5's MTP layer, loaded and skipped
        out += [*nextn(spec, il), (p + "nextn.shared_head_norm.weight", (e,), Q.F32)]
    return out


ZOO: dict[str, TinySpec] = {
    "glm4moe": TinySpec(
        "glm4moe",
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        n_ff=256,
        extra_kv={
            "glm4moe.expert_shared_count": 1,
            "glm4moe.leading_dense_block_count": 1,
            "glm4moe.expert_weights_norm": True,
            "glm4moe.expert_weights_scale": 2.5,
            "glm4moe.expert_gating_func": 2,
        },
    ),
    # variants along the axes real releases differ in
    "glm45-air-shape": TinySpec(  # GLM-4.5(-Air): Q/K norms, 128-wide heads past n_embd, half of each rotated,
        "glm4moe",  # an MTP layer, 128 experts (8 used)
        n_layer=5,
        n_head=8,
        n_head_kv=1,
        head_dim=32,
        n_expert=32,
        n_expert_used=8,
        n_ff_exp=16,
        n_ff_shexp=16,
        optional=("qk_norm",),
        extra_kv={
            "glm4moe.expert_shared_count": 1,
            "glm4moe.leading_dense_block_count": 1,
            "glm4moe.expert_weights_norm": True,
            "glm4moe.expert_weights_scale": 1.0,
            "glm4moe.rope.dimension_count": 16,
            "glm4moe.nextn_predict_layers": 1,
        },
        covers=("Q/K norms", "query width != n_embd", "partial RoPE", "MTP layer", "gating from the default"),
    ),
    "glm4moe-mrope-stripped-mtp": TinySpec(  # GLM-4.5V / 4.6V: multi-section RoPE; MTP declared, not in the file
        "glm4moe",
        n_layer=5,
        n_head_kv=4,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=32,
        n_ff_shexp=32,
        output_type=None,
        without=("blk.4.*",),
        extra_kv={
            "glm4moe.expert_shared_count": 1,
            "glm4moe.leading_dense_block_count": 2,
            "glm4moe.expert_gating_func": 2,
            "glm4moe.rope.dimension_sections": [8, 4, 4, 0],
            "glm4moe.nextn_predict_layers": 1,
        },
        covers=("multi-section RoPE", "MTP declared but not in the file", "2 leading dense layers", "MHA", "tied"),
    ),
}
