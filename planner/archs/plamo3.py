"""PLaMo 3 (src/models/plamo3.cpp): a fused QKV projection read as views, per-head Q/K norms, RoPE on
every layer, a window on 7 of every 8 layers when the header sets one, sandwich norms (post-attention
and post-FFN, named without ".weight") and a fused SwiGLU FFN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import load_swa_pattern, require
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_plamo3(anatomy: ModelAnatomy, meta: Meta) -> None:
    """llama_model_plamo3::load_arch_hparams: a window only when the header sets one (pattern 8)."""
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    n_swa = meta.int_or("attention.sliding_window", 0)
    if n_swa > 0:
        anatomy.swa_type = SWA_STANDARD
        anatomy.n_swa = n_swa
        load_swa_pattern(anatomy, meta, 8)


def build_plamo3(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    iswa = m.swa_type != "none"
    n_tok = ctx.n_tokens
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        residual = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        qkv = ctx.mm(w.layer_req(il, "attn_qkv.weight"), cur)
        hq, hv, n_head, n_kv = layer.head_dim_k, layer.head_dim_v, layer.n_head, layer.n_head_kv
        es = qkv.type.type_size
        q = g.view(qkv, (hq, n_head, n_tok), (hq * 4, qkv.nb[1]), 0)
        k = g.view(qkv, (hq, n_kv, n_tok), (hq * 4, qkv.nb[1]), hq * n_head * es)
        v = g.view(qkv, (hv, n_kv, n_tok), (hv * 4, qkv.nb[1]), (hq * n_head + hq * n_kv) * es)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=iswa)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            residual = g.get_rows(residual, out_ids)
        cur = ctx.build_norm(cur, w.layer(il, "post_attention_norm"), il=il)
        cur = g.add(cur, residual)
        residual = cur
        cur = ctx.build_norm(cur, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_ffn(cur, w.layer(il, "ffn_up.weight"), None, w.layer(il, "ffn_down.weight"), "swiglu", False)
        cur = ctx.build_norm(cur, w.layer(il, "post_ffw_norm"), il=il)
        inp_l = g.add(cur, residual)
    final_output(ctx, inp_l)


read_hparams = read_plamo3
build_graph = build_plamo3
