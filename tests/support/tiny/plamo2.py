"""Tiny models of PLaMo 2 (planner.archs.plamo2; llama_model_plamo2::load_arch_tensors): its own Mamba mixer
where a layer has no KV heads, attention with a fused QKV elsewhere, then a SwiGLU block; several norms
are named without ".weight"."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, norm, output_norm

global_tensors = output_norm


def _mixer(spec: TinySpec, il: int) -> Shapes:
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    d_conv, d_inner, d_state = spec.count("ssm.conv_kernel"), spec.count("ssm.inner_size"), spec.count("ssm.state_size")
    n_heads, dt_dim = spec.count("ssm.time_step_rank"), max(64, e // 16)
    return [
        (p + "ssm_in.weight", (e, 2 * d_inner), w),
        (p + "ssm_conv1d.weight", (d_conv, d_inner), f32),
        (p + "ssm_x.weight", (d_inner, dt_dim + 2 * d_state), w),
        (p + "ssm_dt.weight", (dt_dim, n_heads), w),
        (p + "ssm_dt.bias", (n_heads,), f32),
        (p + "ssm_a", (n_heads,), f32),
        (p + "ssm_d", (n_heads,), f32),
        (p + "ssm_out.weight", (d_inner, e), w),
        (p + "ssm_dt_norm", (dt_dim,), f32),
        (p + "ssm_b_norm", (d_state,), f32),
        (p + "ssm_c_norm", (d_state,), f32),
    ]


def _attention(spec: TinySpec, il: int) -> Shapes:
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    hk, kv = spec.head_k, spec.kv_heads[il]
    nh = spec.q_heads[il] if spec.q_heads else spec.n_head
    return [
        (p + "attn_qkv.weight", (e, hk * (nh + 2 * kv)), w),
        (p + "attn_q_norm.weight", (hk, nh), f32),
        (p + "attn_k_norm.weight", (hk, kv), f32),
        (p + "attn_output.weight", (hk * nh, e), w),
    ]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    mixer = _mixer if spec.kv_heads[il] == 0 else _attention
    return [
        *norm(spec, il, "attn_norm"),
        *mixer(spec, il),
        (p + "post_attention_norm", (e,), f32),
        *norm(spec, il, "ffn_norm"),
        (p + "ffn_down.weight", (spec.n_ff, e), w),
        (p + "ffn_up.weight", (e, 2 * spec.n_ff), w),
        (p + "post_ffw_norm", (e,), f32),
    ]


ZOO: dict[str, TinySpec] = {
    "plamo2": TinySpec(
        "plamo2",
        n_layer=6,
        head_dim=64,
        kv_heads=(0, 2, 0, 2, 0, 2),
        q_heads=(0, 4, 0, 4, 0, 4),
        weight_type=Q.Q8_0,
        extra_kv={
            "plamo2.ssm.conv_kernel": 4,
            "plamo2.ssm.inner_size": 256,
            "plamo2.ssm.state_size": 16,
            "plamo2.ssm.time_step_rank": 4,
            "plamo2.ssm.group_count": 0,
        },
    ),
    # variants along the axes real releases differ in
    "plamo2-tied-mqa-7": TinySpec(  # tied, one KV head, 7 layers (the last one a mixer)
        "plamo2",
        n_layer=7,
        head_dim=64,
        kv_heads=(0, 1, 0, 0, 1, 0, 0),
        q_heads=(0, 4, 0, 0, 4, 0, 0),
        output_type=None,
        extra_kv={
            "plamo2.ssm.conv_kernel": 4,
            "plamo2.ssm.inner_size": 256,
            "plamo2.ssm.state_size": 32,
            "plamo2.ssm.time_step_rank": 8,
            "plamo2.ssm.group_count": 0,
        },
        covers=("tied", "MQA", "odd layer count: last layer recurrent", "state 32"),
    ),
}
