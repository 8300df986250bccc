"""Deci / Llama-Nemotron (src/models/deci.cpp): llama's layers with per-layer head counts and FFN
widths found by architecture search: a layer may have no attention (n_head 0), a "linear" attention
(KV heads 0: only the output projection), or no FFN (its output is then dropped: the next layer reads
the same input, as llama.cpp's graph does). llama.cpp's KV cache keeps every layer, so a layer without
KV heads still gets a V of the widest width when V is stored transposed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_deci(anatomy: ModelAnatomy, meta: Meta) -> None:
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    anatomy.kv_on_every_layer = True


def build_deci(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il, n_head = layer.index, layer.n_head
        inp_sa = inp_l
        cur = inp_l if n_head == 0 else ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        if n_head > 0 and layer.n_head_kv == 0:  # "linear attention": the output projection alone
            cur = ctx.mm(w.layer_req(il, "attn_output.weight"), cur)
        elif n_head > 0:
            hd = layer.head_dim_k
            q, k, v = ctx.build_qkv(layer, cur, hd, n_head, hd, layer.n_head_kv)
            q = g.rope(q, inp_pos, w.rope_freqs(il))
            k = g.rope(k, inp_pos, w.rope_freqs(il))
            wo, wo_b = w.layer(il, "attn_output.weight"), w.layer(il, "attn_output.bias")
            cur = ctx.build_attn(inp_attn, layer, wo, wo_b, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        if layer.n_ff == 0:  # no FFN: llama.cpp moves on without this layer's output
            continue
        ffn_inp = cur if n_head == 0 else g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_ffn(
            cur,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            w.layer(il, "ffn_down.weight"),
            up_b=w.layer(il, "ffn_up.bias"),
            gate_b=w.layer(il, "ffn_gate.bias"),
            down_b=w.layer(il, "ffn_down.bias"),
        )
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = read_deci
build_graph = build_deci
