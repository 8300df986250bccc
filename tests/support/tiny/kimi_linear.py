"""Tiny models of Kimi Linear (planner.archs.kimi_linear): KDA layers (no KV heads) between latent
attention layers, a dense leading layer, then experts with a selection bias and a shared expert."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, norm, output_norm

global_tensors = output_norm


def _kda(spec: TinySpec, il: int) -> Shapes:
    e, w, p, nh = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_head
    hd, d_conv = spec.count("kda.head_dim"), spec.count("ssm.conv_kernel")
    inner = hd * nh
    return [
        (p + "ssm_conv1d_q.weight", (d_conv, 1, inner), Q.F32),
        (p + "ssm_conv1d_k.weight", (d_conv, 1, inner), Q.F32),
        (p + "ssm_conv1d_v.weight", (d_conv, 1, inner), Q.F32),
        (p + "attn_q.weight", (e, inner), w),
        (p + "attn_k.weight", (e, inner), w),
        (p + "attn_v.weight", (e, inner), w),
        (p + "ssm_f_a.weight", (e, hd), w),
        (p + "ssm_f_b.weight", (hd, inner), w),
        (p + "ssm_beta.weight", (e, nh), w),
        (p + "ssm_a", (1, nh), Q.F32),
        (p + "ssm_dt.bias", (inner,), Q.F32),
        (p + "ssm_g_a.weight", (e, hd), w),
        (p + "ssm_g_b.weight", (hd, inner), w),
        (p + "ssm_norm.weight", (hd,), Q.F32),
        (p + "attn_output.weight", (inner, e), w),
    ]


def _mla(spec: TinySpec, il: int) -> Shapes:
    e, w, p, nh = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_head
    rank, rope = spec.count("attention.kv_lora_rank"), spec.count("rope.dimension_count")
    hk, hv = spec.count("attention.key_length_mla"), spec.count("attention.value_length_mla")
    return [
        (p + "attn_kv_a_norm.weight", (rank,), Q.F32),
        (p + "attn_q.weight", (e, nh * hk), w),
        (p + "attn_kv_a_mqa.weight", (e, rank + rope), w),
        (p + "attn_k_b.weight", (hk - rope, rank, nh), w),
        (p + "attn_v_b.weight", (rank, hv, nh), w),
        (p + "attn_output.weight", (nh * hv, e), w),
    ]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, p = spec.n_embd, spec.weight_type, f"blk.{il}."
    out = norm(spec, il, "attn_norm") + (_kda(spec, il) if spec.kv_heads[il] == 0 else _mla(spec, il))
    out += norm(spec, il, "ffn_norm")
    if il < spec.count("leading_dense_block_count", 0):
        ff = spec.n_ff
        return out + [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
            (p + "ffn_up.weight", (e, ff), w),
        ]
    ne, fe = spec.n_expert, spec.n_ff_exp
    fs = fe * spec.count("expert_shared_count")
    return out + [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_gate_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
        (p + "exp_probs_b.bias", (ne,), Q.F32),
    ]


ZOO: dict[str, TinySpec] = {
    # Kimi-Linear-48B-A3B's pattern in small: 3 KDA layers then a latent attention layer (its key the
    # 64-wide latent plus a 32-wide shared part, no RoPE), a dense first layer, 8 sigmoid-routed experts
    "kimi-linear": TinySpec(
        "kimi-linear",
        n_layer=4,
        n_head=4,
        kv_heads=(0, 0, 0, 1),
        head_dim=96,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        weight_type=Q.Q8_0,
        extra_kv={
            f"kimi-linear.{k}": v
            for k, v in {
                "attention.kv_lora_rank": 64,
                "attention.key_length_mla": 64,
                "attention.value_length_mla": 32,
                "rope.dimension_count": 32,
                "ssm.conv_kernel": 4,
                "kda.head_dim": 32,
                "leading_dense_block_count": 1,
                "expert_shared_count": 1,
                "expert_gating_func": 2,
                "expert_weights_scale": 2.446,
            }.items()
        },
    ),
}
