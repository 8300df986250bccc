"""Tiny models of Granite 4 hybrid (planner.archs.granite_hybrid): a Mamba-2 mixer where a layer has no KV
heads, attention elsewhere, a gated FFN after each."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, experts, gated_ffn, norm, output_norm, shared_expert
from tests.support.tiny.mamba import mamba2_mixer

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    mixer = mamba2_mixer if spec.kv_heads[il] == 0 else attention
    ffn = gated_ffn(spec, il)
    if spec.n_expert:  # Granite 4.0 H-Tiny / H-Small: routed experts and a shared expert on every layer
        ffn = experts(spec, il, spec.n_ff) + shared_expert(spec, il, spec.n_ff_shexp)
    return norm(spec, il, "attn_norm") + norm(spec, il, "ffn_norm") + mixer(spec, il) + ffn


def _hybrid_keys(**more: object) -> dict[str, object]:
    keys: dict[str, object] = {
        "ssm.conv_kernel": 4,
        "ssm.inner_size": 256,
        "ssm.state_size": 32,
        "ssm.time_step_rank": 8,
        "ssm.group_count": 1,
        "residual_scale": 0.22,
        "embedding_scale": 12.0,
        "logit_scale": 8.0,
        "attention.scale": 0.015625,
    }
    return {f"granitehybrid.{k}": v for k, v in {**keys, **more}.items()}


ZOO: dict[str, TinySpec] = {
    "granitehybrid": TinySpec(
        "granitehybrid",
        n_layer=6,
        n_head_kv=2,
        kv_heads=(0, 0, 0, 2, 0, 0),
        weight_type=Q.Q8_0,
        extra_kv={
            "granitehybrid.ssm.conv_kernel": 4,
            "granitehybrid.ssm.inner_size": 256,
            "granitehybrid.ssm.state_size": 32,
            "granitehybrid.ssm.time_step_rank": 8,
            "granitehybrid.ssm.group_count": 1,
            "granitehybrid.residual_scale": 0.22,
            "granitehybrid.embedding_scale": 12.0,
            "granitehybrid.logit_scale": 8.0,
            "granitehybrid.attention.scale": 0.015625,
        },
    ),
    # variants along the axes real releases differ in
    "granite4-h-moe-nope": TinySpec(  # Granite 4.0 H-Tiny: no RoPE, a 2^20 context, experts and a shared one
        "granitehybrid",
        n_layer=5,
        n_head_kv=1,
        kv_heads=(0, 0, 1, 0, 0),
        n_expert=8,
        n_expert_used=2,
        n_ff=64,
        n_ff_shexp=128,
        n_ctx_train=1 << 20,
        output_type=None,
        extra_kv=_hybrid_keys(**{"rope.scaling.finetuned": False}),
        covers=("no RoPE", "experts and a shared expert", "tied", "MQA"),
    ),
    "bamba-rope-2-attn": TinySpec(  # Bamba: RoPE, two attention layers, two SSM groups
        "granitehybrid",
        n_layer=6,
        n_head_kv=4,
        kv_heads=(0, 4, 0, 0, 4, 0),
        extra_kv=_hybrid_keys(**{"ssm.group_count": 2, "rope.scaling.finetuned": True}),
        covers=("two attention layers", "MHA", "2 SSM groups"),
    ),
}
