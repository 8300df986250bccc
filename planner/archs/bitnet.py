"""BitNet b1.58 (src/models/bitnet.cpp): llama's layers with a norm inside the attention (before its
output projection) and inside the FFN (before the down projection), per-tensor weight scales, and
the LM head multiplying by token_embd itself (never duplicated as an output tensor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_bitnet(anatomy: ModelAnatomy, meta: Meta) -> None:
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    anatomy.output_is_token_embd = True


def build_bitnet(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        cur = ctx.build_attn(inp_attn, layer, None, None, q, k, v)
        cur = ctx.build_norm(cur, w.layer(il, "attn_sub_norm.weight"), il=il)
        cur = ctx.mm(w.layer_req(il, "attn_output.weight"), cur, w.layer(il, "attn_output.scale"))
        wo_b = w.layer(il, "attn_output.bias")
        if wo_b is not None:
            cur = g.add(cur, wo_b)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_ffn(
            cur,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            None,
            up_s=w.layer(il, "ffn_up.scale"),
            gate_s=w.layer(il, "ffn_gate.scale"),
        )
        cur = ctx.build_norm(cur, w.layer(il, "ffn_sub_norm.weight"), il=il)
        cur = ctx.mm(w.layer_req(il, "ffn_down.weight"), cur, w.layer(il, "ffn_down.scale"))
        inp_l = g.add(cur, ffn_inp)
    cur = ctx.build_norm(inp_l, w.get("output_norm.weight"))
    ctx.set_outputs(cur, ctx.mm(w.get("token_embd.weight"), cur))


read_hparams = read_bitnet
build_graph = build_bitnet
