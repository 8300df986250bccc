"""Tiny models of Falcon-H1 (planner.archs.falcon_h1): attention and a Mamba-2 mixer in every layer;
llama.cpp names the FFN norm without ".weight"."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm
from tests.support.tiny.mamba import mamba2_mixer

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    ffn_norm: Shapes = [(f"blk.{il}.ffn_norm", (spec.n_embd,), Q.F32)]
    return norm(spec, il, "attn_norm") + mamba2_mixer(spec, il) + attention(spec, il) + ffn_norm + gated_ffn(spec, il)


ZOO: dict[str, TinySpec] = {
    "falcon-h1": TinySpec(
        "falcon-h1",
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "falcon-h1.ssm.conv_kernel": 4,
            "falcon-h1.ssm.inner_size": 256,
            "falcon-h1.ssm.state_size": 32,
            "falcon-h1.ssm.time_step_rank": 8,
            "falcon-h1.ssm.group_count": 1,
        },
    ),
    # variants along the axes real releases differ in
    "falcon-h1-no-ssm-norm": TinySpec(  # Falcon-H1 0.5B / 1.5B: no gated norm in the mixer (mamba_rms_norm off)
        "falcon-h1",
        n_head=4,
        n_head_kv=1,
        head_dim=32,
        without=("ssm_norm.weight",),
        extra_kv={
            "falcon-h1.ssm.conv_kernel": 4,
            "falcon-h1.ssm.inner_size": 128,
            "falcon-h1.ssm.state_size": 64,
            "falcon-h1.ssm.time_step_rank": 4,
            "falcon-h1.ssm.group_count": 1,
        },
        covers=("no SSM norm", "MQA", "inner size != 2 x n_embd"),
    ),
    "falcon-h1-tied-bias-groups": TinySpec(
        "falcon-h1",
        n_layer=3,
        n_head=4,
        n_head_kv=4,
        head_dim=32,
        output_type=None,
        optional=("attn_output_bias", "ffn_bias", "rope_freqs"),
        extra_kv={
            "falcon-h1.ssm.conv_kernel": 4,
            "falcon-h1.ssm.inner_size": 256,
            "falcon-h1.ssm.state_size": 16,
            "falcon-h1.ssm.time_step_rank": 8,
            "falcon-h1.ssm.group_count": 2,
        },
        covers=("tied", "attention output and FFN biases", "rope_freqs", "2 SSM groups", "MHA"),
    ),
}
