"""Falcon-H1 (src/models/falcon-h1.cpp): attention and a Mamba-2 mixer side by side in every layer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_ssm,
)
from planner.archs.mamba import mamba2_layer
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _falcon_h1(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Every layer runs attention and a Mamba-2 mixer side by side: a KV cache and a recurrent state each."""
    read_ssm(anatomy, meta)
    for layer in anatomy.layers:
        layer.is_recurrent = layer.kv_beside_rs = True


def build_falcon_h1(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        attn_out = ctx.build_plain_attn(inp_attn, layer, cur, inp_pos)  # llama.cpp passes no output bias
        # the mixer normalizes the layer input again, on its own
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        ssm_out = mamba2_layer(ctx, rs_inp, cur, il)
        inp_sa = g.add(g.add(attn_out, ssm_out), inp_l)
        if il == m.n_trunk - 1:
            inp_sa = g.get_rows(inp_sa, out_ids)  # the layer output's get_rows is never used
        cur = ctx.build_norm(inp_sa, w.layer(il, "ffn_norm"), il=il)
        cur = ctx.build_ffn(
            cur,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            w.layer(il, "ffn_down.weight"),
            "silu",
            True,
            up_b=w.layer(il, "ffn_up.bias"),
            gate_b=w.layer(il, "ffn_gate.bias"),
            down_b=w.layer(il, "ffn_down.bias"),
        )
        inp_l = g.add(cur, inp_sa)
    cur = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur, w.get_optional("output.scale")))


read_hparams = _falcon_h1
build_graph = build_falcon_h1
