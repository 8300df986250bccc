"""DeepSeek V2 / V3 and Mistral 4 (src/models/deepseek2.cpp): multi-head latent attention (the KV cache
holds the compressed latent), leading dense layers, grouped routing and a shared expert. DeepSeek-OCR's
decoder (deepseek2ocr.cpp, built by deepseek2's graph) has plain multi-head attention instead.

The graph pieces are shared with DeepSeek V3.2 (planner.archs.deepseek32).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_experts,
    require,
)
from planner.ggml_graph import F32, Tensor, row_size
from planner.graphs.context import GraphContext
from planner.hparams import (
    GATING_SOFTMAX,
    LatentAttention,
)
from planner.model import LayerAnatomy

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_deepseek2(anatomy: ModelAnatomy, meta: Meta) -> None:
    if anatomy.architecture == "deepseek2-ocr":  # llama_model_deepseek2ocr requires the shared-expert count
        require(anatomy, meta, "attention.layer_norm_rms_epsilon", "expert_shared_count")
    read_experts(anatomy, meta)
    if anatomy.experts is not None:
        experts = anatomy.experts
        experts.n_layer_dense_lead = meta.int_or("leading_dense_block_count", 0)
        experts.gating_func = experts.gating_func or GATING_SOFTMAX  # none means softmax (the V2 routers)
        experts.n_groups = meta.int_or("expert_group_count", 0)
        experts.n_group_used = meta.int_or("expert_group_used_count", 0)
    head_k_mla = meta.int_or("attention.key_length_mla", 0)
    head_v_mla = meta.int_or("attention.value_length_mla", 0)
    latent = head_k_mla > 0 and head_v_mla > 0
    layer0 = anatomy.layers[0]
    anatomy.mla = LatentAttention(
        n_lora_q=meta.int_or("attention.q_lora_rank", 0),
        n_lora_kv=meta.int_or("attention.kv_lora_rank", 0),
        head_k=head_k_mla if latent else layer0.head_dim_k,
        head_v=head_v_mla if latent else layer0.head_dim_v,
        latent_cache=latent,
    )
    anatomy.f_attn_temp_scale = meta.float_or("attention.temperature_scale", 0.0)
    if latent:
        anatomy.notes.append("multi-head latent attention: the KV cache holds the compressed latent only (no V)")


def kv_latent(ctx: GraphContext, il: int, cur: Tensor, inp_pos: Tensor) -> tuple[Tensor, Tensor]:
    """The compressed KV latent (normed, [kv_lora, n_tokens]) and the roped shared K part."""
    g, w, m = ctx.g, ctx.w, ctx.model
    rope, kv_lora, n_tok = m.rope_dims, m.latent_attention.n_lora_kv, ctx.n_tokens
    kv_pe = g.mul_mat(w.layer_req(il, "attn_kv_a_mqa.weight"), cur)
    stride = row_size(kv_pe.type, kv_lora + rope)
    kv_cmpr = g.view(kv_pe, (kv_lora, n_tok), (stride,), 0)
    k_pe = g.view(kv_pe, (rope, 1, n_tok), (stride, stride), row_size(kv_pe.type, kv_lora))
    k_pe = g.rope(k_pe, inp_pos)
    kv_cmpr = ctx.build_norm(kv_cmpr, w.layer(il, "attn_kv_a_norm.weight"), il=il)
    return kv_cmpr, k_pe


def absorbed_qkv(
    ctx: GraphContext, layer: LayerAnatomy, q: Tensor, kv_cmpr: Tensor, k_pe: Tensor, inp_pos: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Q, K and V of latent attention with the K projection absorbed into Q (MQA over the latent).

    `q` is wq_b's output, flat or already [head_k, n_head, n_tokens]: the views take explicit strides."""
    g, w, mla = ctx.g, ctx.w, ctx.model.latent_attention
    il, n_head, n_tok = layer.index, layer.n_head, ctx.n_tokens
    hd_k, rope = mla.head_k, ctx.model.rope_dims
    nope = hd_k - rope
    strides = (row_size(q.type, hd_k), row_size(q.type, hd_k) * n_head)
    q_nope = g.view(q, (nope, n_head, n_tok), strides, 0)
    q_pe = g.view(q, (rope, n_head, n_tok), strides, row_size(q.type, nope))
    q_pe = g.rope(q_pe, inp_pos)
    q_nope = g.permute(q_nope, 0, 2, 1, 3)
    q_abs = g.mul_mat(w.layer_req(il, "attn_k_b.weight"), q_nope)
    q_abs = g.permute(q_abs, 0, 2, 1, 3)
    q_cur = g.concat(q_abs, q_pe, 0)
    kv_cmpr = g.reshape(kv_cmpr, mla.n_lora_kv, 1, n_tok)
    k_cur = g.concat(kv_cmpr, k_pe, 0)
    return q_cur, k_cur, kv_cmpr


def ffn_block(ctx: GraphContext, il: int, cur: Tensor) -> Tensor:
    """The leading dense layers' FFN, else routed experts plus the shared expert."""
    w, experts = ctx.w, ctx.model.experts
    if experts is None or il < experts.n_layer_dense_lead:
        return ctx.build_layer_ffn(cur, il)
    gating = experts.gating
    moe = ctx.build_moe_ffn(
        cur,
        il,
        experts.n_expert,
        experts.n_used,
        "silu",
        norm_w=experts.weights_norm,
        w_scale=experts.weights_scale,
        gating=gating,
        exp_probs_b=w.layer(il, "exp_probs_b.bias"),
        n_expert_groups=experts.n_groups,
        n_group_used=experts.n_group_used,
    )
    shared = ctx.build_shared_expert(cur, il)
    return ctx.g.add(moe, shared)


def finish_layer(ctx: GraphContext, il: int, cur: Tensor, inp_sa: Tensor, out_ids: Tensor) -> Tensor:
    """After attention: keep the output rows on the last layer, residual, FFN norm, FFN, residual."""
    g = ctx.g
    if il == ctx.model.n_trunk - 1:
        cur = g.get_rows(cur, out_ids)
        inp_sa = g.get_rows(inp_sa, out_ids)
    ffn_inp = g.add(cur, inp_sa)
    cur = ctx.build_norm(ffn_inp, ctx.w.layer(il, "ffn_norm.weight"), il=il)
    cur = ffn_block(ctx, il, cur)
    return g.add(cur, ffn_inp)


def finish_model(ctx: GraphContext, inp_l: Tensor) -> None:
    cur = ctx.build_norm(inp_l, ctx.w.get_optional("output_norm.weight"))
    ctx.set_outputs(cur, ctx.g.mul_mat(ctx.output_weight(), cur))


def build_deepseek2(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    mla = m.latent_attention
    is_mla = mla.latent_cache
    hd_k, hd_v = mla.head_k, mla.head_v
    rope = m.rope_dims
    nope = hd_k - rope
    n_tok = ctx.n_tokens
    inp_l = ctx.build_inp_embd()
    attn_scale = g.input(F32, (1, 1, n_tok), "inp_attn_scale") if m.f_attn_temp_scale else None
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_k() if is_mla else ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        n_head = layer.n_head
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        if m.architecture == "deepseek2-ocr":  # multi-head attention, NeoX RoPE on the whole head
            hd = layer.head_dim_k
            q, k, v = ctx.build_qkv(layer, cur, hd, n_head, hd, n_head)
            q, k = g.rope(q, inp_pos), g.rope(k, inp_pos)
            cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
            inp_l = finish_layer(ctx, il, cur, inp_sa, out_ids)
            continue
        if w.layer(il, "attn_q_a.weight") is not None:
            q = g.mul_mat(w.layer_req(il, "attn_q_a.weight"), cur)
            q = ctx.build_norm(q, w.layer(il, "attn_q_a_norm.weight"), il=il)
            q = g.mul_mat(w.layer_req(il, "attn_q_b.weight"), q)
        else:
            q = g.mul_mat(w.layer_req(il, "attn_q.weight"), cur)
        q = g.reshape(q, hd_k, n_head, n_tok)
        kv_cmpr, k_pe = kv_latent(ctx, il, cur, inp_pos)
        if is_mla:
            q_cur, k_cur, v_cur = absorbed_qkv(ctx, layer, q, kv_cmpr, k_pe, inp_pos)
            if attn_scale is not None:
                q_cur = g.mul(q_cur, attn_scale)
            cur = ctx.build_attn_k(
                inp_attn,
                layer,
                w.layer(il, "attn_output.weight"),
                q_cur,
                k_cur,
                v_cur,
                v_mla=w.layer_req(il, "attn_v_b.weight"),
            )
        else:
            kv = g.mul_mat(w.layer_req(il, "attn_kv_b.weight"), kv_cmpr)
            stride_kv = row_size(kv.type, nope + hd_v)
            k_nope = g.view(kv, (nope, n_head, n_tok), (stride_kv, stride_kv * n_head), 0)
            v_cur = g.view(kv, (hd_v, n_head, n_tok), (stride_kv, stride_kv * n_head), row_size(kv.type, nope))
            v_cur = g.cont(v_cur)
            q_cur = g.rope(q, inp_pos)
            k_cur = g.concat(k_nope, g.repeat(k_pe, (rope, n_head, n_tok, 1)), 0)
            if attn_scale is not None:
                q_cur = g.mul(q_cur, attn_scale)
            cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q_cur, k_cur, v_cur)
        inp_l = finish_layer(ctx, il, cur, inp_sa, out_ids)
    finish_model(ctx, inp_l)


read_hparams = read_deepseek2
build_graph = build_deepseek2
