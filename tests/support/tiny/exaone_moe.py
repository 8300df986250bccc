"""Tiny models of EXAONE MoE (planner.archs.exaone_moe): per-head Q/K norms; a dense FFN in the leading
layers and the multi-token-prediction layers, routed plus shared experts elsewhere."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, nextn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, f32, hk, p = spec.n_embd, spec.weight_type, Q.F32, spec.head_k, f"blk.{il}."
    qk_norms: Shapes = [(p + "attn_q_norm.weight", (hk,), f32), (p + "attn_k_norm.weight", (hk,), f32)]
    out = attention(spec, il) + norm(spec, il, "attn_norm") + qk_norms + norm(spec, il, "ffn_norm")
    mtp = il >= spec.n_layer - spec.count("nextn_predict_layers", 0)
    if il < spec.count("leading_dense_block_count", 0) or mtp:  # gate, down, up: the loader's order here
        ff = spec.n_ff
        out += [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
            (p + "ffn_up.weight", (e, ff), w),
        ]
    else:
        ne, fe, fs = spec.n_expert, spec.n_ff_exp, spec.n_ff_shexp
        out += [
            (p + "ffn_gate_inp.weight", (e, ne), f32),
            (p + "exp_probs_b.bias", (ne,), f32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "ffn_gate_shexp.weight", (e, fs), w),
            (p + "ffn_down_shexp.weight", (fs, e), w),
            (p + "ffn_up_shexp.weight", (e, fs), w),
        ]
    if mtp and "mtp_heads" in spec.optional:  # the MTP layer's own embeddings, head and head norm (optional)
        vocab = (spec.n_embd, spec.n_vocab)
        out += [
            (p + "nextn.embed_tokens.weight", vocab, spec.embd_type),
            (p + "nextn.shared_head_head.weight", vocab, w),
            (p + "nextn.shared_head_norm.weight", (e,), f32),
        ]
    return out + nextn(spec, il) if mtp else out


ZOO: dict[str, TinySpec] = {
    # 3 of 4 layers windowed (RoPE on those only), a leading dense layer, sigmoid-routed experts with a
    # selection bias and a shared expert, one multi-token-prediction layer (skipped)
    "exaone-moe": TinySpec(
        "exaone-moe",
        n_layer=6,
        n_head_kv=2,
        n_swa=128,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "exaone-moe.leading_dense_block_count": 1,
            "exaone-moe.nextn_predict_layers": 1,
            "exaone-moe.expert_gating_func": 2,
            "exaone-moe.expert_weights_norm": True,
            "exaone-moe.expert_weights_scale": 2.5,
            "exaone-moe.expert_shared_count": 1,
        },
    ),
    # variants along the axes real releases differ in
    "exaone-moe-array-mtp-heads": TinySpec(  # K-EXAONE: its layer types as an array, MTP heads in the file
        "exaone-moe",
        n_layer=6,
        n_head=4,
        n_head_kv=1,
        n_swa=256,
        n_expert=16,
        n_expert_used=4,
        n_ff_exp=32,
        n_ff_shexp=32,
        optional=("mtp_heads",),
        extra_kv={
            "exaone-moe.attention.sliding_window_pattern": [True, True, False, True, True, False],
            "exaone-moe.leading_dense_block_count": 1,
            "exaone-moe.nextn_predict_layers": 1,
            "exaone-moe.expert_gating_func": 2,
            "exaone-moe.expert_weights_norm": True,
            "exaone-moe.expert_weights_scale": 2.5,
            "exaone-moe.expert_shared_count": 1,
        },
        covers=("explicit per-layer window array", "MTP heads in the file", "MQA", "16 experts, 4 used"),
    ),
}
