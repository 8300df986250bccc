"""Tiny models of Qwen3-Next and Qwen3.5 (planner.archs.qwen3next; llama_model_qwen3next::load_arch_tensors):
gated delta-net layers and every `full_attention_interval`-th layer gated full attention; a dense FFN in
qwen35, routed experts plus a gated shared expert in the others."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, experts, gated_ffn, nextn, norm, output_norm, shared_expert

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
    if "legacy_ssm_in" in spec.optional:  # a legacy Qwen3-Next conversion: q, k, v and z in one projection
        qkv: Shapes = [(p + "ssm_in.weight", (e, 2 * key_dim + 2 * value_dim), w)]
    else:
        qkv = [(p + "attn_qkv.weight", (e, 2 * key_dim + value_dim), w), (p + "attn_gate.weight", (e, value_dim), w)]
    return [
        *qkv,
        (p + "ssm_conv1d.weight", (spec.count("ssm.conv_kernel"), 2 * key_dim + value_dim), f32),
        (p + "ssm_dt.bias", (n_v,), f32),
        (p + "ssm_a", (n_v,), f32),
        *beta_alpha,
        (p + "ssm_norm.weight", (value_dim // n_v,), f32),
        (p + "ssm_out.weight", (value_dim, e), w),
    ]


def _is_recurrent(spec: TinySpec, il: int) -> bool:
    """A delta-net layer: from the header's recurrent_layers array, else all but every interval-th layer;
    the multi-token-prediction layers at the end are full attention."""
    if il >= spec.n_layer - spec.count("nextn_predict_layers", 0):
        return False
    explicit = spec.extra_kv.get(f"{spec.arch}.attention.recurrent_layers")
    if isinstance(explicit, list):
        return bool(explicit[il])
    return (il + 1) % spec.count("full_attention_interval", 4) != 0


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    out = norm(spec, il, "attn_norm") + norm(spec, il, "post_attention_norm")
    out += _delta_net(spec, il) if _is_recurrent(spec, il) else _gated_attention(spec, il)
    if spec.arch == "qwen35":  # dense FFN
        out += gated_ffn(spec, il)
    else:
        shared_gate: Shapes = [(f"blk.{il}.ffn_gate_inp_shexp.weight", (spec.n_embd,), Q.F32)]
        out += experts(spec, il, spec.n_ff_exp) + shared_gate + shared_expert(spec, il, spec.n_ff_shexp)
    if il >= spec.n_layer - spec.count("nextn_predict_layers", 0):  # the MTP block's own tensors
        out += [*nextn(spec, il), (f"blk.{il}.nextn.shared_head_norm.weight", (spec.n_embd,), Q.F32)]
    return out


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
    # variants along the axes real releases differ in
    "qwen35-mtp-array-tied": TinySpec(  # Qwen3.5: an MTP block after the trunk, recurrent layers as an array
        "qwen35",
        n_layer=7,
        n_head=4,
        n_head_kv=1,
        head_dim=64,
        n_ff=128,
        output_type=None,
        extra_kv={
            "qwen35.ssm.conv_kernel": 4,
            "qwen35.ssm.inner_size": 128,
            "qwen35.ssm.state_size": 32,
            "qwen35.ssm.time_step_rank": 4,
            "qwen35.ssm.group_count": 2,
            "qwen35.attention.recurrent_layers": [True, True, False, True, True, False, False],
            "qwen35.rope.dimension_sections": [16, 8, 8, 0],
            "qwen35.nextn_predict_layers": 1,
        },
        covers=("MTP block", "explicit recurrent-layer array", "MQA", "tied"),
    ),
    "qwen35moe-mtp-fused": TinySpec(  # Qwen3.5 MoE: 32 experts here (256 real), 8 used; fused gate-up experts
        "qwen35moe",
        n_layer=6,
        n_head=8,
        n_head_kv=2,
        head_dim=32,
        n_expert=32,
        n_expert_used=8,
        n_ff_exp=16,
        n_ff_shexp=32,
        n_ff=64,
        optional=("fused_gate_up_exps",),
        extra_kv={
            "qwen35moe.ssm.conv_kernel": 4,
            "qwen35moe.ssm.inner_size": 256,
            "qwen35moe.ssm.state_size": 32,
            "qwen35moe.ssm.time_step_rank": 8,
            "qwen35moe.ssm.group_count": 2,
            "qwen35moe.full_attention_interval": 4,
            "qwen35moe.rope.dimension_sections": [8, 4, 4, 0],
            "qwen35moe.nextn_predict_layers": 1,
        },
        covers=("MTP block", "32 experts, 8 used", "fused gate-up experts", "layers not a multiple of the interval"),
    ),
    "qwen3next-legacy-mtp": TinySpec(  # an early Qwen3-Next conversion (ssm_in) with the MTP block
        "qwen3next",
        n_layer=5,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_expert=16,
        n_expert_used=4,
        n_ff_exp=32,
        n_ff_shexp=32,
        n_ff=64,
        output_type=None,
        optional=("legacy_ssm_in",),
        extra_kv={
            "qwen3next.ssm.conv_kernel": 4,
            "qwen3next.ssm.inner_size": 128,
            "qwen3next.ssm.state_size": 32,
            "qwen3next.ssm.time_step_rank": 4,
            "qwen3next.ssm.group_count": 2,
            "qwen3next.full_attention_interval": 4,
            "qwen3next.rope.dimension_count": 16,
            "qwen3next.nextn_predict_layers": 1,
        },
        covers=("legacy fused q/k/v/z projection", "MTP block", "tied", "16 experts, 4 used"),
    ),
}
