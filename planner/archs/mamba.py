"""Mamba-1 and Mamba-2 (src/models/mamba.cpp, graph-context-mamba.cpp): every layer recurrent; the
mixers are shared with the hybrids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_ssm,
)
from planner.ggml_graph import F32, Tensor
from planner.graphs.context import GraphContext
from planner.recurrent import n_embd_r, n_embd_s

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _mamba(anatomy: ModelAnatomy, meta: Meta) -> None:
    read_ssm(anatomy, meta)
    for layer in anatomy.layers:
        layer.is_recurrent = True
        layer.has_kv = False


def mamba_layer(ctx: GraphContext, inp: dict[str, Tensor], cur: Tensor, il: int) -> Tensor:
    """build_mamba_layer (Mamba-1)."""
    g, w, ssm = ctx.g, ctx.w, ctx.model.state_space
    d_conv, d_inner, d_state, dt_rank = ssm.d_conv, ssm.d_inner, ssm.d_state, ssm.dt_rank
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    r_l, s_l = w.rs(il)

    conv = ctx.build_rs(inp, r_l, n_embd_r(ctx.model), n_seqs)
    conv = g.reshape(conv, d_conv - 1, d_inner, n_seqs)
    cur = g.reshape(cur, cur.ne[0], n_seq_tokens, n_seqs)
    xz = ctx.mm(w.layer_req(il, "ssm_in.weight"), cur)
    xs = g.view(xz, (d_inner, xz.ne[1], xz.ne[2]), (xz.nb[1], xz.nb[2]), 0)
    z = g.view(xz, (d_inner, xz.ne[1], xz.ne[2]), (xz.nb[1], xz.nb[2]), d_inner * xz.type.type_size)
    conv_x = g.concat(conv, g.transpose(xs), 0)
    last = g.view(conv_x, (d_conv - 1, d_inner, n_seqs), (conv_x.nb[1], conv_x.nb[2]), n_seq_tokens * conv_x.nb[0])
    g.expand(g.cpy(last, g.view(r_l, ((d_conv - 1) * d_inner * n_seqs,), (), 0)))
    xs = g.op("SSM_CONV", F32, (d_inner, n_seq_tokens, n_seqs), [conv_x, w.layer_req(il, "ssm_conv1d.weight")])
    xs = g.add(xs, w.layer_req(il, "ssm_conv1d.bias"))
    xs = g.unary(xs)
    x_db = ctx.mm(w.layer_req(il, "ssm_x.weight"), xs)
    es = x_db.type.type_size
    dt = g.view(x_db, (dt_rank, n_seq_tokens, n_seqs), (x_db.nb[1], x_db.nb[2]), 0)
    bb = g.view(x_db, (d_state, 1, n_seq_tokens, n_seqs), (d_state * x_db.nb[0], x_db.nb[1], x_db.nb[2]), es * dt_rank)
    cc = g.view(
        x_db,
        (d_state, 1, n_seq_tokens, n_seqs),
        (d_state * x_db.nb[0], x_db.nb[1], x_db.nb[2]),
        es * (dt_rank + d_state),
    )
    dt_norm, b_norm, c_norm = (w.layer(il, f"ssm_{n}_norm.weight") for n in ("dt", "b", "c"))
    if ssm.dt_b_c_rms or (dt_norm is not None and b_norm is not None and c_norm is not None):
        dt = ctx.build_norm(dt, dt_norm, il=il)
        bb = ctx.build_norm(bb, b_norm, il=il)
        cc = ctx.build_norm(cc, c_norm, il=il)
    else:
        dt = g.cont(dt)
    dt = ctx.mm(w.layer_req(il, "ssm_dt.weight"), dt)
    dt = g.add(dt, w.layer_req(il, "ssm_dt.bias"))
    cur = xs
    xs = g.reshape(xs, 1, d_inner, n_seq_tokens, n_seqs)
    a = w.layer_req(il, "ssm_a")
    size = ctx.shape.n_rs

    def scan(states: Tensor, ids: Tensor) -> Tensor:
        ssm = g.reshape(states, d_state, 1, d_inner, size)
        n = xs.n_elements() + ssm.ne[0] * ssm.ne[1] * ssm.ne[2] * ids.ne[0]
        return g.op("SSM_SCAN", F32, (n,), [ssm, xs, dt, a, bb, cc, ids])

    y_ssm = ctx.build_rs(inp, s_l, n_embd_s(ctx.model), n_seqs, scan)
    g.expand(
        g.cpy(
            g.view(y_ssm, (d_state * d_inner * n_seqs,), (), xs.nb[3] * xs.ne[3]),
            g.view(s_l, (d_state * d_inner * n_seqs,), (), 0),
        )
    )
    y = g.view(y_ssm, (d_inner, n_seq_tokens, n_seqs), (xs.nb[2], xs.nb[3]), 0)
    y = g.add(y, g.mul(cur, w.layer_req(il, "ssm_d")))
    y = g.glu_split(g.cont(z), y)
    cur = ctx.mm(w.layer_req(il, "ssm_out.weight"), y)
    return g.reshape(cur, cur.ne[0], n_seq_tokens * n_seqs)


def mamba2_layer(ctx: GraphContext, inp: dict[str, Tensor], cur: Tensor, il: int) -> Tensor:
    """build_mamba2_layer (Mamba-2, also the SSM layers of the hybrids)."""
    g, w, ssm = ctx.g, ctx.w, ctx.model.state_space
    d_conv, d_inner, d_state = ssm.d_conv, ssm.d_inner, ssm.d_state
    n_head, n_group = ssm.dt_rank, ssm.n_group
    head_dim = d_inner // n_head
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    mem_size = ctx.shape.n_rs
    r_l, s_l = w.rs(il)

    conv_dim = d_inner + 2 * n_group * d_state
    conv = ctx.build_rs(inp, r_l, n_embd_r(ctx.model), n_seqs)
    conv = g.reshape(conv, d_conv - 1, conv_dim, n_seqs)
    zx = ctx.mm(w.layer_req(il, "ssm_in.weight"), cur)
    zx = g.reshape(zx, zx.ne[0], n_seq_tokens, n_seqs)
    es = zx.type.type_size
    z = g.view(zx, (head_dim, n_head, n_seq_tokens, n_seqs), (head_dim * zx.nb[0], zx.nb[1], zx.nb[2]), 0)
    xbc = g.view(zx, (conv_dim, n_seq_tokens, n_seqs), (zx.nb[1], zx.nb[2]), d_inner * es)
    dt = g.view(zx, (n_head, n_seq_tokens, n_seqs), (zx.nb[1], zx.nb[2]), (2 * d_inner + 2 * n_group * d_state) * es)
    conv_x = g.concat(conv, g.transpose(xbc), 0)
    row_count = (d_conv - 1) * conv_dim
    row_bytes = row_count * r_l.type.type_size
    last = g.view(conv_x, (d_conv - 1, conv_dim, n_seqs), (conv_x.nb[1], conv_x.nb[2]), n_seq_tokens * conv_x.nb[0])
    g.expand(g.cpy(last, g.view(r_l, (row_count, n_seqs), (r_l.nb[1],), 0 * row_bytes)))
    xbc = g.op("SSM_CONV", F32, (conv_dim, n_seq_tokens, n_seqs), [conv_x, w.layer_req(il, "ssm_conv1d.weight")])
    xbc = g.add(xbc, w.layer_req(il, "ssm_conv1d.bias"))
    xbc = g.unary(xbc)
    xs = g.view(xbc, (head_dim, n_head, n_seq_tokens, n_seqs), (head_dim * xbc.nb[0], xbc.nb[1], xbc.nb[2]), 0)
    bb = g.view(
        xbc,
        (d_state, n_group, n_seq_tokens, n_seqs),
        (d_state * xbc.nb[0], xbc.nb[1], xbc.nb[2]),
        d_inner * xbc.type.type_size,
    )
    cc = g.view(
        xbc,
        (d_state, n_group, n_seq_tokens, n_seqs),
        (d_state * xbc.nb[0], xbc.nb[1], xbc.nb[2]),
        (d_inner + n_group * d_state) * xbc.type.type_size,
    )
    dt = g.add(g.cont(dt), w.layer_req(il, "ssm_dt.bias"))
    a = w.layer_req(il, "ssm_a")
    slots = s_l.ne[1]

    def scan(states: Tensor, ids: Tensor) -> Tensor:
        ssm = g.reshape(states, d_state, head_dim, n_head, slots)
        n = xs.n_elements() + ssm.ne[0] * ssm.ne[1] * ssm.ne[2] * ids.ne[0]
        return g.op("SSM_SCAN", F32, (n,), [ssm, xs, dt, a, bb, cc, ids])

    y_ssm = ctx.build_rs(inp, s_l, n_embd_s(ctx.model), n_seqs, scan)
    d = d_state * d_inner
    y_row = d * y_ssm.type.type_size
    s_row = d * s_l.type.type_size
    g.expand(
        g.cpy(
            g.view(y_ssm, (d, n_seqs, 1), (y_row, y_row * n_seqs), xs.n_elements() * 4),
            g.view(s_l, (d, n_seqs, 1), (s_l.nb[1], mem_size * s_row), 0),
        )
    )
    y = g.view(
        y_ssm,
        (head_dim, n_head, n_seq_tokens, n_seqs),
        (xs.nb[1], n_head * xs.nb[1], n_seq_tokens * n_head * xs.nb[1]),
        0,
    )
    y = g.add(y, g.mul(xs, w.layer_req(il, "ssm_d")))
    y = g.glu_split(g.cont(z), y)
    norm = w.layer(il, "ssm_norm.weight")
    if norm is not None:
        y = g.reshape(y, d_inner // n_group, n_group, n_seq_tokens, n_seqs)
        y = ctx.build_norm(y, norm, il=il)
    y = g.reshape(y, d_inner, n_seq_tokens * n_seqs)
    return ctx.mm(w.layer_req(il, "ssm_out.weight"), y)


def build_mamba(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    rs_inp = ctx.build_rs_inp()
    out_ids = ctx.build_inp_out_ids()
    layer_fn = mamba2_layer if m.architecture == "mamba2" else mamba_layer
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        cur = layer_fn(ctx, rs_inp, cur, il)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        inp_l = g.add(cur, inp_l)
    cur = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur))


read_hparams = _mamba
build_graph = build_mamba
