"""Tiny models of Granite 4 hybrid (planner.archs.granite_hybrid): a Mamba-2 mixer where a layer has no KV
heads, attention elsewhere, a gated FFN after each."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm
from tests.support.tiny.mamba import mamba2_mixer

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    mixer = mamba2_mixer if spec.kv_heads[il] == 0 else attention
    return norm(spec, il, "attn_norm") + norm(spec, il, "ffn_norm") + mixer(spec, il) + gated_ffn(spec, il)


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
}
