"""Tiny models of LFM2 and LFM2-MoE (planner.archs.lfm2): gated short convolutions where a layer has no KV
heads, attention with per-head Q/K norms elsewhere; routed experts after the leading dense layers in lfm2moe."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, experts, gated_ffn, norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, f32, hk, p = spec.n_embd, spec.weight_type, Q.F32, spec.head_k, f"blk.{il}."
    out = norm(spec, il, "attn_norm") + norm(spec, il, "ffn_norm")
    if spec.kv_heads[il] == 0:
        out += [
            (p + "shortconv.conv.weight", (spec.count("shortconv.l_cache"), e), f32),
            (p + "shortconv.in_proj.weight", (e, 3 * e), w),
            (p + "shortconv.out_proj.weight", (e, e), w),
        ]
    else:
        out += [*attention(spec, il), (p + "attn_q_norm.weight", (hk,), f32), (p + "attn_k_norm.weight", (hk,), f32)]
    if spec.arch == "lfm2moe" and il >= spec.count("leading_dense_block_count", 0):
        return out + [*experts(spec, il, spec.n_ff_exp), (p + "exp_probs_b.bias", (spec.n_expert,), f32)]
    return out + gated_ffn(spec, il)


def global_tensors(spec: TinySpec) -> Shapes:
    return [("token_embd_norm.weight", (spec.n_embd,), Q.F32)]


ZOO: dict[str, TinySpec] = {
    "lfm2": TinySpec(
        "lfm2",
        n_layer=6,
        n_head_kv=2,
        kv_heads=(0, 0, 2, 0, 0, 2),
        output_type=None,
        extra_kv={"lfm2.shortconv.l_cache": 3},
    ),
    "lfm2moe": TinySpec(
        "lfm2moe",
        n_layer=6,
        n_head_kv=2,
        kv_heads=(0, 0, 2, 0, 0, 2),
        output_type=None,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        extra_kv={
            "lfm2moe.shortconv.l_cache": 3,
            "lfm2moe.leading_dense_block_count": 2,
            "lfm2moe.expert_gating_func": 2,  # sigmoid, with a per-expert selection bias
        },
    ),
    # variants along the axes real releases differ in
    "lfm2-mha-untied-8": TinySpec(  # attention on 3 of 8 layers, the last one attention, full KV heads
        "lfm2",
        n_layer=8,
        n_head_kv=4,
        kv_heads=(0, 4, 0, 0, 4, 0, 0, 4),
        extra_kv={"lfm2.shortconv.l_cache": 3},
        covers=("MHA", "untied", "last layer attention", "per-layer KV heads"),
    ),
    "lfm2-swa": TinySpec(  # LFM2.5's audio tokenizer: a window on the attention layers
        "lfm2",
        n_layer=4,
        n_head_kv=1,
        kv_heads=(0, 1, 0, 1),
        n_swa=128,
        output_type=None,
        extra_kv={"lfm2.shortconv.l_cache": 3},
        covers=("sliding window on the attention layers", "MQA"),
    ),
    "lfm2moe-32e": TinySpec(  # LFM2-8B-A1B: 32 experts, 4 used, after 2 dense layers
        "lfm2moe",
        n_layer=5,
        n_head_kv=1,
        kv_heads=(0, 1, 0, 0, 1),
        output_type=None,
        n_expert=32,
        n_expert_used=4,
        n_ff_exp=16,
        extra_kv={
            "lfm2moe.shortconv.l_cache": 3,
            "lfm2moe.leading_dense_block_count": 2,
            "lfm2moe.expert_gating_func": 2,
        },
        covers=("32 experts, 4 used", "MQA", "odd layer count"),
    ),
}
