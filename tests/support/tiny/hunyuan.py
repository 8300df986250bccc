"""Tiny models of Hunyuan dense (planner.archs.hunyuan): llama's layers with per-head Q/K norms."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, gated_ffn, norm, output_norm, qk_norm_attention

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    attn = norm(spec, il, "attn_norm") + qk_norm_attention(spec, il)
    return attn + norm(spec, il, "ffn_norm") + gated_ffn(spec, il)


ZOO: dict[str, TinySpec] = {
    # per-head Q/K norms after RoPE; an expert count of 1 means no experts
    "hunyuan-dense": TinySpec(
        "hunyuan-dense",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={"hunyuan-dense.expert_count": 1, "hunyuan-dense.expert_used_count": 1},
    ),
    # variants along the axes real releases differ in
    "hunyuan-dense-untied-no-expert-keys": TinySpec(  # Hunyuan 0.5B-7B: no expert keys at all; untied
        "hunyuan-dense", n_head_kv=1, head_dim=64, covers=("no expert keys", "untied", "MQA", "head size")
    ),
}
