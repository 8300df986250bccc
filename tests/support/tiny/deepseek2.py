"""Tiny models of DeepSeek V2 / V3 and Mistral 4 (planner.archs.deepseek2): latent attention (MLA), leading
dense layers, routed experts plus a shared expert; the pieces are shared with DeepSeek V3.2."""

from __future__ import annotations

from typing import Any

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import (
    Shapes,
    TinySpec,
    attention,
    experts,
    gated_ffn,
    nextn,
    output_norm,
    shared_expert,
)

global_tensors = output_norm


def latent_attention(spec: TinySpec, il: int) -> Shapes:
    """The attention norm, the latent attention's projections and norms, and the FFN norm."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    kv_lora, q_lora = spec.count("attention.kv_lora_rank"), spec.count("attention.q_lora_rank", 0)
    # an older conversion without the MLA head sizes: K and V decompressed by one attn_kv_b (no latent cache)
    mla = f"{spec.arch}.attention.key_length_mla" in spec.extra_kv
    hk = spec.count("attention.key_length_mla") if mla else spec.head_k
    hv = spec.count("attention.value_length_mla") if mla else spec.head_v
    rope = spec.count("rope.dimension_count")
    nope, nh = hk - rope, spec.n_head
    out: Shapes = [(p + "attn_norm.weight", (e,), f32)]
    if q_lora:  # DeepSeek-V2-Lite has no compressed queries
        out.append((p + "attn_q_a_norm.weight", (q_lora,), f32))
    out.append((p + "attn_kv_a_norm.weight", (kv_lora,), f32))
    if q_lora:
        out += [(p + "attn_q_a.weight", (e, q_lora), w), (p + "attn_q_b.weight", (q_lora, nh * hk), w)]
    else:
        out.append((p + "attn_q.weight", (e, nh * hk), w))
    out.append((p + "attn_kv_a_mqa.weight", (e, kv_lora + rope), w))
    if mla:
        out += [(p + "attn_k_b.weight", (nope, kv_lora, nh), Q.F16), (p + "attn_v_b.weight", (kv_lora, hv, nh), Q.F16)]
    else:
        out.append((p + "attn_kv_b.weight", (kv_lora, nh * (nope + hv)), w))
    return out + [(p + "attn_output.weight", (nh * hv, e), w), (p + "ffn_norm.weight", (e,), f32)]


def ffn_block(spec: TinySpec, il: int) -> Shapes:
    """A dense FFN in the leading layers, else routed experts and the shared expert; the MTP layers' own."""
    if il < spec.count("leading_dense_block_count"):
        return gated_ffn(spec, il)
    fe, p = spec.n_ff_exp, f"blk.{il}."
    out = experts(spec, il, fe) + shared_expert(spec, il, fe * spec.count("expert_shared_count"))
    if spec.count("expert_gating_func", 0) == 2:
        out.append((p + "exp_probs_b.bias", (spec.n_expert,), Q.F32))
    if il >= spec.n_layer - spec.count("nextn_predict_layers", 0):
        out += [*nextn(spec, il), (p + "nextn.shared_head_norm.weight", (spec.n_embd,), Q.F32)]
        if "mtp_heads" in spec.optional:  # the MTP layer's own embeddings and head (optional in the loader)
            vocab: tuple[int, int] = (spec.n_embd, spec.n_vocab)
            out += [(p + "nextn.embed_tokens.weight", vocab, spec.embd_type)]
            out += [(p + "nextn.shared_head_head.weight", vocab, spec.weight_type)]
    return out


def _ocr(spec: TinySpec, il: int) -> Shapes:
    """DeepSeek-OCR's decoder: plain Q/K/V, then the norms (FFN's first), then deepseek2's FFN block."""
    f32, p = Q.F32, f"blk.{il}."
    out = attention(spec, il) + [
        (p + "ffn_norm.weight", (spec.n_embd,), f32),
        (p + "attn_norm.weight", (spec.n_embd,), f32),
    ]
    if il < spec.count("leading_dense_block_count"):
        gate, up, down = gated_ffn(spec, il)
        return out + [down, up, gate]
    gate_inp, gate_exps, up_exps, down_exps = experts(spec, il, spec.n_ff_exp)
    gate, up, down = shared_expert(spec, il, spec.n_ff_exp * spec.count("expert_shared_count"))
    return out + [gate_inp, down_exps, gate_exps, up_exps, gate, down, up]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    if spec.arch == "deepseek2-ocr":
        return _ocr(spec, il)
    return latent_attention(spec, il) + ffn_block(spec, il)


# DeepSeek V3's routing: sigmoid gates with a bias, normalised and scaled weights, grouped experts
V3_ROUTING: dict[str, Any] = {
    "expert_gating_func": 2,
    "expert_weights_norm": True,
    "expert_weights_scale": 2.5,
    "expert_group_count": 4,
    "expert_group_used_count": 2,
}


def mla_spec(arch: str, extra: dict[str, Any] | None = None, **spec: Any) -> TinySpec:
    """A tiny latent-attention (MLA) model with experts, deepseek2's shape; `extra` keys are `arch`'s."""
    keys = {
        "attention.kv_lora_rank": 64,
        "attention.q_lora_rank": 32,
        "attention.key_length_mla": 64,
        "attention.value_length_mla": 32,
        "rope.dimension_count": 32,
        "leading_dense_block_count": 1,
        "expert_shared_count": 1,
        **(extra or {}),
    }
    shape: dict[str, Any] = dict(n_head=4, n_head_kv=1, head_dim=96, n_expert=8, n_expert_used=2, n_ff_exp=32, n_ff=128)
    return TinySpec(arch, **{**shape, **spec}, extra_kv={f"{arch}.{k}": v for k, v in keys.items()})


ZOO: dict[str, TinySpec] = {
    "deepseek2": mla_spec("deepseek2"),
    "mistral4": mla_spec("mistral4"),
    "deepseek2-mtp": mla_spec("deepseek2", {"nextn_predict_layers": 1}, n_layer=5, name="tiny-glm-mtp"),
    "deepseek3": mla_spec("deepseek2", V3_ROUTING, name="tiny-deepseek-v3"),
    # DeepSeek-OCR's decoder: multi-head attention, one dense layer, 8 experts (softmax) and a shared one
    "deepseek2-ocr": TinySpec(
        "deepseek2-ocr",
        n_head_kv=4,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=32,
        extra_kv={"deepseek2-ocr.leading_dense_block_count": 1, "deepseek2-ocr.expert_shared_count": 2},
    ),
    # variants along the axes real releases differ in
    "deepseek2-lite": mla_spec(  # DeepSeek-V2-Lite: no compressed queries, 64 experts (6 used), 2 shared
        "deepseek2",
        {"attention.q_lora_rank": 0, "expert_shared_count": 2},
        n_expert=16,
        n_expert_used=6,
        covers=("no compressed queries (q_lora_rank 0)", "16 experts, 6 used", "2 shared experts"),
    ),
    "deepseek2-no-mla-keys": TinySpec(  # an older conversion: no key_length_mla, K and V cached in full
        "deepseek2",
        n_head=4,
        n_head_kv=4,
        head_dim=64,
        head_dim_v=32,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=32,
        n_ff=128,
        extra_kv={
            "deepseek2.attention.kv_lora_rank": 64,
            "deepseek2.attention.q_lora_rank": 32,
            "deepseek2.rope.dimension_count": 32,
            "deepseek2.leading_dense_block_count": 1,
            "deepseek2.expert_shared_count": 1,
        },
        covers=("no MLA head sizes: K and V cached in full", "K and V head sizes differ"),
    ),
    "deepseek3-mtp-heads": mla_spec(  # V3 with its MTP layer's own embeddings and output head in the file
        "deepseek2",
        {**V3_ROUTING, "nextn_predict_layers": 1},
        n_layer=5,
        name="tiny-deepseek-v3",
        optional=("mtp_heads",),
        covers=("MTP layer with its own embeddings and head", "grouped routing"),
    ),
    "deepseek3-mtp-stripped": mla_spec(  # a conversion that keeps nextn_predict_layers but drops the layer
        "deepseek2",
        {**V3_ROUTING, "nextn_predict_layers": 1},
        n_layer=5,
        without=("blk.4.*",),
        covers=("MTP layer declared but not in the file",),
    ),
    "kimi-k2-shape": mla_spec(  # Kimi K2: sigmoid routing without groups, many experts, tied here, fused
        "deepseek2",
        {"expert_gating_func": 2, "expert_weights_norm": True, "expert_weights_scale": 2.827},
        n_expert=64,
        n_expert_used=8,
        n_ff_exp=16,
        output_type=None,
        optional=("fused_gate_up_exps",),
        covers=("64 experts, 8 used, sigmoid without groups", "tied", "fused gate-up experts"),
    ),
    "deepseek2-temperature": mla_spec(  # Mistral Large 3 on deepseek2: queries scaled by position
        "deepseek2",
        {"attention.temperature_scale": 0.1, "attention.temperature_length": 8192},
        covers=("temperature scale",),
    ),
}
