"""Granite 4 hybrid (src/models/granite-hybrid.cpp): Mamba-2 layers where a layer has no KV heads,
Granite's scaled attention elsewhere, a dense or MoE FFN after each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_ssm,
    recurrent_where_no_kv_heads,
)
from planner.archs.granite import granite_attention, granite_ffn, granite_output, granite_scales
from planner.archs.mamba import mamba2_layer
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _granite_hybrid(anatomy: ModelAnatomy, meta: Meta) -> None:
    granite_scales(anatomy, meta)  # logit_scale is optional here
    anatomy.use_rope = bool(meta.get("rope.scaling.finetuned", True))
    read_ssm(anatomy, meta)
    recurrent_where_no_kv_heads(anatomy)


def build_granite_hybrid(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    inp_pos = ctx.build_inp_pos() if m.use_rope else None
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        if layer.is_recurrent:
            cur = mamba2_layer(ctx, rs_inp, cur, il)
        else:
            cur = granite_attention(ctx, inp_attn, inp_pos, layer, cur)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        inp_l = granite_ffn(ctx, cur, inp_sa, il)
    granite_output(ctx, inp_l, logit_scale=bool(m.f_logit_scale))


read_hparams = _granite_hybrid
build_graph = build_granite_hybrid
