"""MiniCPM3 (src/models/minicpm3.cpp): DeepSeek V2's low-rank Q and KV projections decompressed into
plain multi-head attention (the KV cache holds full heads), RoPE on the tail of each head, MiniCPM's
fixed scales (embeddings, residuals, the LM head's input).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.ggml_graph import row_size
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_minicpm3(anatomy: ModelAnatomy, meta: Meta) -> None:
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "attention.q_lora_rank", "attention.kv_lora_rank")


def build_minicpm3(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    n_tok, rope = ctx.n_tokens, m.rope_dims
    kv_lora = int(m.metadata[f"{m.architecture}.attention.kv_lora_rank"])
    inp_l = g.scale(ctx.build_inp_embd())
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il, n_head = layer.index, layer.n_head
        hd_k, hd_v = layer.head_dim_k, layer.head_dim_v
        nope = hd_k - rope
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        q = g.mul_mat(w.layer_req(il, "attn_q_a.weight"), cur)
        q = ctx.build_norm(q, w.layer(il, "attn_q_a_norm.weight"), il=il)
        q = g.reshape(g.mul_mat(w.layer_req(il, "attn_q_b.weight"), q), hd_k, n_head, n_tok)
        kv_pe = g.mul_mat(w.layer_req(il, "attn_kv_a_mqa.weight"), cur)
        kv_cmpr = g.view(kv_pe, (kv_lora, n_tok), (kv_pe.nb[1],), 0)
        k_pe = g.view(kv_pe, (rope, 1, n_tok), (kv_pe.nb[1], kv_pe.nb[1]), row_size(kv_pe.type, kv_lora))
        kv_cmpr = ctx.build_norm(kv_cmpr, w.layer(il, "attn_kv_a_norm.weight"), il=il)
        kv = g.mul_mat(w.layer_req(il, "attn_kv_b.weight"), kv_cmpr)
        stride = row_size(kv.type, nope + hd_v)
        k_nope = g.view(kv, (nope, n_head, n_tok), (stride, stride * n_head), 0)
        v = g.cont(g.view(kv, (hd_v, n_head, n_tok), (stride, stride * n_head), row_size(kv.type, nope)))
        q = g.rope(q, inp_pos, w.rope_freqs(il, "rope_factors_long.weight"))
        k_pe = g.rope(k_pe, inp_pos, w.rope_freqs(il, "rope_factors_long.weight"))
        k = g.concat(k_nope, g.repeat(k_pe, (rope, n_head, n_tok, 1)), 0)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(g.scale(cur), inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        inp_l = g.add(g.scale(ctx.build_layer_ffn(cur, il)), ffn_inp)
    cur = ctx.build_norm(inp_l, w.get("output_norm.weight"))
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), g.scale(cur)))


read_hparams = read_minicpm3
build_graph = build_minicpm3
