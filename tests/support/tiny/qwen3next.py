"""Tiny models of Qwen3-Next and Qwen3.5 (planner.archs.qwen3next; llama_model_qwen3next::load_arch_tensors):
gated delta-net layers and every `full_attention_interval`-th layer gated full attention; a dense FFN in
qwen35, routed experts plus a gated shared expert in the others."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, experts, gated_ffn, norm, output_norm, shared_expert

global_tensors = output_norm


def _gated_attention(spec: TinySpec, il: int) -> Shapes:
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    hd, nh, nkv = spec.head_k, spec.n_head, spec.n_head_kv
    return [
        (p + "attn_q.weight", (e, hd * nh * 2), w),
        (p + "attn_k.weight", (e, hd * nkv), w),
        (p + "attn_v.weight", (e, hd * nkv), w),
        (p + "attn_output.weight", (hd * nh, e), w),
        (p + "attn_q_norm.weight", (hd,), f32),
        (p + "attn_k_norm.weight", (hd,), f32),
    ]


def _delta_net(spec: TinySpec, il: int) -> Shapes:
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    d_state, n_k, n_v = spec.count("ssm.state_size"), spec.count("ssm.group_count"), spec.count("ssm.time_step_rank")
    key_dim, value_dim = d_state * n_k, spec.count("ssm.inner_size")
    if spec.arch.startswith("qwen35"):  # Qwen3.5: beta and alpha projected apart
        beta_alpha: Shapes = [(p + "ssm_beta.weight", (e, n_v), w), (p + "ssm_alpha.weight", (e, n_v), w)]
    else:
        beta_alpha = [(p + "ssm_ba.weight", (e, 2 * n_v), w)]
    return [
        (p + "attn_qkv.weight", (e, 2 * key_dim + value_dim), w),
        (p + "attn_gate.weight", (e, value_dim), w),
        (p + "ssm_conv1d.weight", (spec.count("ssm.conv_kernel"), 2 * key_dim + value_dim), f32),
        (p + "ssm_dt.bias", (n_v,), f32),
        (p + "ssm_a", (n_v,), f32),
        *beta_alpha,
        (p + "ssm_norm.weight", (value_dim // n_v,), f32),
        (p + "ssm_out.weight", (value_dim, e), w),
    ]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    out = norm(spec, il, "attn_norm") + norm(spec, il, "post_attention_norm")
    full_attention = (il + 1) % spec.count("full_attention_interval", 4) == 0
    out += _gated_attention(spec, il) if full_attention else _delta_net(spec, il)
    if spec.arch == "qwen35":  # dense FFN
        return out + gated_ffn(spec, il)
    shared_gate: Shapes = [(f"blk.{il}.ffn_gate_inp_shexp.weight", (spec.n_embd,), Q.F32)]
    return out + experts(spec, il, spec.n_ff_exp) + shared_gate + shared_expert(spec, il, spec.n_ff_shexp)


ZOO: dict[str, TinySpec] = {
    "qwen35": TinySpec(
        "qwen35",
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_ff=128,
        weight_type=Q.Q8_0,
        extra_kv={
            "qwen35.ssm.conv_kernel": 4,
            "qwen35.ssm.inner_size": 128,
            "qwen35.ssm.state_size": 32,
            "qwen35.ssm.time_step_rank": 4,
            "qwen35.ssm.group_count": 2,
            "qwen35.full_attention_interval": 4,
            "qwen35.rope.dimension_sections": [16, 8, 8, 0],
        },
    ),
    "qwen35moe": TinySpec(
        "qwen35moe",
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        n_ff=64,
        extra_kv={
            "qwen35moe.ssm.conv_kernel": 4,
            "qwen35moe.ssm.inner_size": 128,
            "qwen35moe.ssm.state_size": 32,
            "qwen35moe.ssm.time_step_rank": 4,
            "qwen35moe.ssm.group_count": 4,
            "qwen35moe.full_attention_interval": 4,
            "qwen35moe.rope.dimension_sections": [16, 8, 8, 0],
        },
    ),
    "qwen3next": TinySpec(
        "qwen3next",
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        n_ff=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "qwen3next.ssm.conv_kernel": 4,
            "qwen3next.ssm.inner_size": 128,
            "qwen3next.ssm.state_size": 32,
            "qwen3next.ssm.time_step_rank": 4,
            "qwen3next.ssm.group_count": 2,
            "qwen3next.full_attention_interval": 2,
            "qwen3next.rope.dimension_count": 16,
        },
    ),
}
