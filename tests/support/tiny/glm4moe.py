"""Tiny models of GLM-4.5 (planner.archs.glm4moe): attention with biases, post_attention_norm before the
FFN, dense leading layers, then sigmoid-routed experts with a selection bias and an ungated shared expert."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, biased_attention, gated_ffn, norm, output_norm, shared_expert

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    out = norm(spec, il, "attn_norm") + biased_attention(spec, il) + norm(spec, il, "post_attention_norm")
    if il < spec.count("leading_dense_block_count", 0):
        return out + gated_ffn(spec, il)
    e, w, ne, fe, p = spec.n_embd, spec.weight_type, spec.n_expert, spec.n_ff_exp, f"blk.{il}."
    return out + [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "exp_probs_b.bias", (ne,), Q.F32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        *shared_expert(spec, il, spec.n_ff_shexp),
    ]


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
}
