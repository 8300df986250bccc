"""LFM2 and LFM2-MoE (src/models/lfm2.cpp): gated short convolutions (recurrent state) where a layer
has no KV heads, attention elsewhere; routed experts after the leading dense layers in lfm2moe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_experts,
    recurrent_where_no_kv_heads,
)
from planner.ggml_graph import F32, Tensor
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD
from planner.recurrent import n_embd_r

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _lfm2(anatomy: ModelAnatomy, meta: Meta) -> None:
    read_experts(anatomy, meta)
    anatomy.shortconv_l_cache = meta.int_or("shortconv.l_cache", 0)
    recurrent_where_no_kv_heads(anatomy)
    # only lfm2 reads a window (LFM2.5's audio tokenizer): its attention layers use it
    n_swa = meta.int_or("attention.sliding_window", 0) if anatomy.architecture == "lfm2" else 0
    if n_swa > 0:
        anatomy.swa_type, anatomy.n_swa = SWA_STANDARD, n_swa
        for layer in anatomy.layers:
            layer.is_swa = not layer.is_recurrent
    # LFM2 names its output norm "token_embd_norm" (read as the first layer's, where other families use it)
    first = anatomy.layers[0].tensors if anatomy.layers else []
    moved = [t for t in first if t.name.startswith("token_embd_norm.")]
    if anatomy.layers:
        anatomy.layers[0].tensors = [t for t in first if t not in moved]
    anatomy.output_tensors.extend(moved)


def _shortconv(ctx: GraphContext, inp: dict[str, Tensor], cur: Tensor, il: int) -> Tensor:
    """LFM2's gated short convolution block."""
    g, w, m = ctx.g, ctx.w, ctx.model
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    l_cache = m.shortconv_l_cache
    d_conv = l_cache - 1
    cur = g.reshape(cur, cur.ne[0], n_seq_tokens, n_seqs)
    bcx = ctx.mm(w.layer_req(il, "shortconv.in_proj.weight"), cur)
    chunk = bcx.ne[0] // 3
    es = bcx.type.type_size
    b, c, x = (g.view(bcx, (chunk, bcx.ne[1], bcx.ne[2]), (bcx.nb[1], bcx.nb[2]), i * chunk * es) for i in range(3))
    bx = g.transpose(g.mul(b, x))
    r_l, _ = w.rs(il)
    conv = ctx.build_rs(inp, r_l, n_embd_r(m), n_seqs)
    conv = g.reshape(conv, d_conv, m.n_embd, n_seqs)
    bx = g.concat(conv, bx, 0)
    snap = g.view(bx, (d_conv, bx.ne[1], bx.ne[2]), (bx.nb[1], bx.nb[2]), (bx.ne[0] - d_conv) * bx.type.type_size)
    g.expand(g.cpy(snap, g.view(r_l, (d_conv * m.n_embd, n_seqs), (r_l.nb[1],), 0)))
    conv_out = g.op(
        "SSM_CONV", F32, (bx.ne[1], bx.ne[0] - l_cache + 1, bx.ne[2]), [bx, w.layer_req(il, "shortconv.conv.weight")]
    )
    y = g.mul(c, conv_out)
    y = ctx.mm(w.layer_req(il, "shortconv.out_proj.weight"), y)
    return g.reshape(y, y.ne[0], n_seq_tokens * n_seqs)


def build_lfm2(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    iswa = m.has_swa
    cur = ctx.build_inp_embd()
    g.expand(cur)
    rs_inp = ctx.build_rs_inp()
    if iswa:
        inp_full, inp_swa = ctx.build_attn_inp_kv(swa=False), ctx.build_attn_inp_kv(swa=True)
    else:
        inp_full = inp_swa = ctx.build_attn_inp_kv()
    inp_pos = ctx.build_inp_pos()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        prev = cur
        cur = ctx.build_norm(cur, w.layer(il, "attn_norm.weight"), il=il)
        if layer.is_recurrent:
            cur = _shortconv(ctx, rs_inp, cur, il)
        else:
            hd = layer.head_dim_k
            q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
            q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
            k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
            q = g.rope(q, inp_pos)
            k = g.rope(k, inp_pos)
            inp = inp_swa if layer.is_swa else inp_full
            cur = ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=iswa)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            prev = g.get_rows(prev, out_ids)
        cur = g.add(prev, cur)
        normed = ctx.build_norm(cur, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is not None:
            out = ctx.build_moe_ffn(
                normed,
                il,
                m.moe.n_expert,
                m.moe.n_used,
                "silu",
                True,
                m.moe.weights_scale,
                m.moe.gating,
                exp_probs_b=w.layer(il, "exp_probs_b.bias"),
            )
        else:
            out = ctx.build_layer_ffn(normed, il)
        cur = g.add(cur, out)
    cur = ctx.build_norm(cur, w.get_optional("token_embd_norm.weight"))
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur))


read_hparams = _lfm2
build_graph = build_lfm2
