"""Tiny models of Mamba-1 and Mamba-2 (planner.archs.mamba): every layer recurrent; the mixers are shared
with the hybrids (llama_model_mamba*::load_arch_tensors)."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, norm, output_norm

global_tensors = output_norm


def mamba_mixer(spec: TinySpec, il: int) -> Shapes:
    """A Mamba-1 mixer."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    d_conv, d_inner, d_state = spec.count("ssm.conv_kernel"), spec.count("ssm.inner_size"), spec.count("ssm.state_size")
    dt_rank = spec.count("ssm.time_step_rank")
    return [
        (p + "ssm_in.weight", (e, 2 * d_inner), w),
        (p + "ssm_conv1d.weight", (d_conv, d_inner), f32),
        (p + "ssm_conv1d.bias", (d_inner,), f32),
        (p + "ssm_x.weight", (d_inner, dt_rank + 2 * d_state), w),
        (p + "ssm_dt.weight", (dt_rank, d_inner), w),
        (p + "ssm_dt.bias", (d_inner,), f32),
        (p + "ssm_a", (d_state, d_inner), f32),
        (p + "ssm_d", (d_inner,), f32),
        (p + "ssm_out.weight", (d_inner, e), w),
    ]


def mamba2_mixer(spec: TinySpec, il: int) -> Shapes:
    """A Mamba-2 mixer (grouped B and C, a gated norm)."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    d_conv, d_inner, d_state = spec.count("ssm.conv_kernel"), spec.count("ssm.inner_size"), spec.count("ssm.state_size")
    dt_rank, n_group = spec.count("ssm.time_step_rank"), spec.count("ssm.group_count")
    conv_dim = d_inner + 2 * n_group * d_state
    return [
        (p + "ssm_in.weight", (e, d_inner + conv_dim + dt_rank), w),
        (p + "ssm_conv1d.weight", (d_conv, conv_dim), f32),
        (p + "ssm_conv1d.bias", (conv_dim,), f32),
        (p + "ssm_dt.bias", (dt_rank,), f32),
        (p + "ssm_a", (1, dt_rank), f32),
        (p + "ssm_d", (1, dt_rank), f32),
        (p + "ssm_norm.weight", (d_inner // n_group, n_group), f32),
        (p + "ssm_out.weight", (d_inner, e), w),
    ]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    mixer = mamba_mixer if spec.arch == "mamba" else mamba2_mixer
    return norm(spec, il, "attn_norm") + mixer(spec, il)


ZOO: dict[str, TinySpec] = {
    "mamba": TinySpec(
        "mamba",
        n_head=0,
        n_head_kv=0,
        n_ff=0,
        extra_kv={
            "mamba.ssm.conv_kernel": 4,
            "mamba.ssm.inner_size": 256,
            "mamba.ssm.state_size": 16,
            "mamba.ssm.time_step_rank": 8,
        },
    ),
    "mamba2": TinySpec(
        "mamba2",
        n_head=0,
        n_head_kv=0,
        n_ff=0,
        weight_type=Q.Q8_0,
        extra_kv={
            "mamba2.ssm.conv_kernel": 4,
            "mamba2.ssm.inner_size": 256,
            "mamba2.ssm.state_size": 64,
            "mamba2.ssm.time_step_rank": 8,
            "mamba2.ssm.group_count": 2,
        },
    ),
    # variants along the axes real releases differ in
    "falcon-mamba-dt-rms": TinySpec(  # Falcon Mamba: RMS norms on dt, B and C; untied
        "mamba",
        n_head=0,
        n_head_kv=0,
        n_ff=0,
        extra_kv={
            "mamba.ssm.conv_kernel": 4,
            "mamba.ssm.inner_size": 256,
            "mamba.ssm.state_size": 16,
            "mamba.ssm.time_step_rank": 16,
            "mamba.ssm.dt_b_c_rms": True,
        },
        covers=("dt/B/C RMS norms", "untied"),
    ),
    "mamba-tied": TinySpec(  # state-spaces/mamba-*: tied embeddings, a wider state
        "mamba",
        n_head=0,
        n_head_kv=0,
        n_ff=0,
        n_layer=3,
        output_type=None,
        extra_kv={
            "mamba.ssm.conv_kernel": 4,
            "mamba.ssm.inner_size": 256,
            "mamba.ssm.state_size": 32,
            "mamba.ssm.time_step_rank": 8,
        },
        covers=("tied", "state 32", "odd layer count"),
    ),
    "mamba2-1-group-tied": TinySpec(  # mamba2-130m..2.7b: one group, state 128, 64-wide heads, tied
        "mamba2",
        n_head=0,
        n_head_kv=0,
        n_ff=0,
        output_type=None,
        extra_kv={
            "mamba2.ssm.conv_kernel": 4,
            "mamba2.ssm.inner_size": 256,
            "mamba2.ssm.state_size": 128,
            "mamba2.ssm.time_step_rank": 4,
            "mamba2.ssm.group_count": 1,
        },
        covers=("1 group", "state 128", "tied"),
    ),
    "mamba2-8-groups": TinySpec(  # Codestral Mamba: 8 groups
        "mamba2",
        n_head=0,
        n_head_kv=0,
        n_ff=0,
        extra_kv={
            "mamba2.ssm.conv_kernel": 4,
            "mamba2.ssm.inner_size": 256,
            "mamba2.ssm.state_size": 32,
            "mamba2.ssm.time_step_rank": 8,
            "mamba2.ssm.group_count": 8,
        },
        covers=("8 groups", "untied"),
    ),
}
