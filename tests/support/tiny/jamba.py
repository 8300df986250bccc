"""Tiny models of Jamba (planner.archs.jamba): a Mamba-1 mixer with RMS norms on dt, B and C where a layer
has no KV heads, attention elsewhere; routed experts on every other layer."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, experts, gated_ffn, norm, output_norm
from tests.support.tiny.mamba import mamba_mixer

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    out = norm(spec, il, "attn_norm") + norm(spec, il, "ffn_norm")
    if spec.kv_heads[il] == 0:  # RMS norms on dt, B and C before the mixer
        p, d_state = f"blk.{il}.", spec.count("ssm.state_size")
        out += [
            (p + "ssm_dt_norm.weight", (spec.count("ssm.time_step_rank"),), Q.F32),
            (p + "ssm_b_norm.weight", (d_state,), Q.F32),
            (p + "ssm_c_norm.weight", (d_state,), Q.F32),
            *mamba_mixer(spec, il),
        ]
    else:
        out += attention(spec, il)
    routed = spec.n_expert and il % 2 == 1  # experts on every other layer
    return out + (experts(spec, il, spec.n_ff) if routed else gated_ffn(spec, il))


ZOO: dict[str, TinySpec] = {
    "jamba": TinySpec(
        "jamba",
        n_layer=6,
        n_head_kv=2,
        kv_heads=(0, 0, 0, 2, 0, 0),
        n_expert=4,
        n_expert_used=2,
        n_ff=128,
        extra_kv={
            "jamba.ssm.conv_kernel": 4,
            "jamba.ssm.inner_size": 256,
            "jamba.ssm.state_size": 16,
            "jamba.ssm.time_step_rank": 8,
        },
    ),
    # variants along the axes real releases differ in
    "jamba-mini-shape": TinySpec(  # Jamba 1.5 Mini: attention on 1 of 8 layers, 16 experts on every other
        "jamba",
        n_layer=8,
        n_head=4,
        n_head_kv=1,
        kv_heads=(0, 0, 0, 0, 1, 0, 0, 0),
        n_expert=16,
        n_expert_used=2,
        n_ff=64,
        extra_kv={
            "jamba.ssm.conv_kernel": 4,
            "jamba.ssm.inner_size": 256,
            "jamba.ssm.state_size": 16,
            "jamba.ssm.time_step_rank": 8,
        },
        covers=("16 experts", "attention 1 of 8 layers", "MQA"),
    ),
}
