"""Tiny models of Nemotron-H and Nemotron-H MoE (planner.archs.nemotron_h): each layer a Mamba-2 mixer (no
KV heads, no FFN), attention (no FFN) or a ReLU² feed-forward block (routed experts in the MoE variant)."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, norm, output_norm, ungated_ffn
from tests.support.tiny.mamba import mamba2_mixer

global_tensors = output_norm


def _experts(spec: TinySpec, il: int) -> Shapes:
    """Routed ReLU² experts (in a latent space when moe_latent_size is set) and the shared expert."""
    e, w, p, ne = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_expert
    latent = spec.count("moe_latent_size", 0)
    per_layer = spec.extra_kv.get(f"{spec.arch}.expert_feed_forward_length")  # Nemotron 3 Puzzle
    fe = per_layer[il] if isinstance(per_layer, list) else spec.n_ff_exp
    me, fs = latent or e, spec.n_ff_shexp
    out: Shapes = [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "exp_probs_b.bias", (ne,), Q.F32),
        (p + "ffn_up_exps.weight", (me, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, me, ne), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
    ]
    if latent:
        out += [(p + "ffn_latent_down.weight", (e, latent), w), (p + "ffn_latent_up.weight", (latent, e), w)]
    return out


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, p = spec.n_embd, spec.weight_type, f"blk.{il}."
    n_ff, attn_norm = spec.ff_lengths[il], norm(spec, il, "attn_norm")
    if il >= spec.n_layer - spec.count("nextn_predict_layers", 0):
        # the multi-token-prediction block: NextN fusion, attention and experts in one
        return [
            (p + "nextn.enorm.weight", (e,), Q.F32),
            (p + "nextn.hnorm.weight", (e,), Q.F32),
            (p + "nextn.eh_proj.weight", (2 * e, e), w),
            (p + "nextn.shared_head_norm.weight", (e,), Q.F32),
            *attn_norm,
            *attention(spec, il),
            *norm(spec, il, "post_attention_norm"),
            *_experts(spec, il),
        ]
    if n_ff and spec.n_expert:
        return attn_norm + _experts(spec, il)
    if n_ff:
        return attn_norm + ungated_ffn(spec, il, n_ff)
    return attn_norm + (attention(spec, il) if spec.kv_heads[il] else mamba2_mixer(spec, il))


ZOO: dict[str, TinySpec] = {
    "nemotron-h": TinySpec(
        "nemotron_h",
        n_layer=6,
        kv_heads=(0, 2, 0, 0, 0, 0),
        ff_lengths=(0, 0, 256, 0, 256, 0),
        output_type=None,
        extra_kv={
            "nemotron_h.ssm.conv_kernel": 4,
            "nemotron_h.ssm.inner_size": 256,
            "nemotron_h.ssm.state_size": 32,
            "nemotron_h.ssm.time_step_rank": 8,
            "nemotron_h.ssm.group_count": 2,
            "nemotron_h.attention.layer_norm_epsilon": 1e-5,
        },
    ),
    "nemotron-h-moe": TinySpec(
        "nemotron_h_moe",
        n_layer=6,
        kv_heads=(0, 0, 2, 0, 0, 0),
        ff_lengths=(0, 64, 0, 64, 0, 64),
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=128,
        extra_kv={
            "nemotron_h_moe.ssm.conv_kernel": 4,
            "nemotron_h_moe.ssm.inner_size": 256,
            "nemotron_h_moe.ssm.state_size": 32,
            "nemotron_h_moe.ssm.time_step_rank": 8,
            "nemotron_h_moe.ssm.group_count": 2,
            "nemotron_h_moe.attention.layer_norm_epsilon": 1e-5,
            "nemotron_h_moe.expert_weights_norm": True,
            "nemotron_h_moe.expert_weights_scale": 2.5,
        },
    ),
    # Nemotron 3 Super's shape: experts in a latent space, a multi-token-prediction block (not loaded)
    "nemotron-h-super": TinySpec(
        "nemotron_h_moe",
        n_layer=7,
        n_embd=256,
        kv_heads=(0, 0, 2, 0, 0, 0, 2),
        ff_lengths=(0, 64, 0, 64, 0, 64, 64),
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=128,
        weight_type=Q.Q8_0,
        extra_kv={
            "nemotron_h_moe.ssm.conv_kernel": 4,
            "nemotron_h_moe.ssm.inner_size": 512,
            "nemotron_h_moe.ssm.state_size": 32,
            "nemotron_h_moe.ssm.time_step_rank": 8,
            "nemotron_h_moe.ssm.group_count": 2,
            "nemotron_h_moe.attention.layer_norm_epsilon": 1e-5,
            "nemotron_h_moe.moe_latent_size": 64,
            "nemotron_h_moe.nextn_predict_layers": 1,
            "nemotron_h_moe.expert_weights_norm": True,
            "nemotron_h_moe.expert_weights_scale": 2.5,
        },
    ),
    # variants along the axes real releases differ in
    "nemotron-nano-v2-shape": TinySpec(  # Nemotron Nano 9B v2: 128-wide heads past n_embd / n_head, 8 groups
        "nemotron_h",
        n_layer=7,
        n_head=4,
        n_head_kv=1,
        head_dim=64,
        kv_heads=(0, 0, 1, 0, 0, 0, 0),
        ff_lengths=(0, 256, 0, 0, 256, 0, 256),
        optional=("attn_output_bias",),
        extra_kv={
            "nemotron_h.ssm.conv_kernel": 4,
            "nemotron_h.ssm.inner_size": 256,
            "nemotron_h.ssm.state_size": 32,
            "nemotron_h.ssm.time_step_rank": 8,
            "nemotron_h.ssm.group_count": 8,
            "nemotron_h.attention.layer_norm_epsilon": 1e-5,
        },
        covers=("head size != n_embd / n_head", "8 SSM groups", "MQA", "untied", "attention output bias"),
    ),
    "nemotron-puzzle-per-layer": TinySpec(  # Nemotron 3 Puzzle: expert width and top-k per layer
        "nemotron_h_moe",
        n_layer=6,
        kv_heads=(0, 0, 2, 0, 0, 0),
        ff_lengths=(0, 64, 0, 64, 0, 64),
        n_expert=16,
        n_expert_used=6,
        n_ff_exp=32,
        n_ff_shexp=64,
        output_type=None,
        extra_kv={
            "nemotron_h_moe.ssm.conv_kernel": 4,
            "nemotron_h_moe.ssm.inner_size": 256,
            "nemotron_h_moe.ssm.state_size": 32,
            "nemotron_h_moe.ssm.time_step_rank": 8,
            "nemotron_h_moe.ssm.group_count": 2,
            "nemotron_h_moe.attention.layer_norm_epsilon": 1e-5,
            "nemotron_h_moe.expert_weights_norm": True,
            "nemotron_h_moe.expert_weights_scale": 2.5,
            "nemotron_h_moe.expert_used_count": [0, 6, 0, 2, 0, 4],
            "nemotron_h_moe.expert_feed_forward_length": [0, 32, 0, 16, 0, 48],
        },
        covers=("per-layer top-k", "per-layer expert width", "16 experts", "tied"),
    ),
}
