"""PLaMo 2 (src/models/plamo2.cpp): its own Mamba mixer where a layer has no KV heads, attention elsewhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_ssm,
    recurrent_where_no_kv_heads,
)
from planner.errors import GGUFError
from planner.ggml_graph import F32, Tensor
from planner.graphs.context import GraphContext
from planner.model import LayerAnatomy
from planner.recurrent import n_embd_r, n_embd_s

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _plamo2(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Mamba layers where a layer has no KV heads. Layer 0 is a Mamba layer with no heads, so the head
    sizes come from key/value_length alone (llama_model_plamo2::load_arch_hparams)."""
    read_ssm(anatomy, meta)
    layer0 = anatomy.layers[0]
    head_k = meta.int_or("attention.key_length", layer0.head_dim_k)
    head_v = meta.int_or("attention.value_length", layer0.head_dim_v)
    if not (0 <= head_k <= 1 << 16 and 0 <= head_v <= 1 << 16):
        raise GGUFError(anatomy.path, f"attention head sizes {head_k}/{head_v} are out of range")
    for layer in anatomy.layers:
        layer.head_dim_k, layer.head_dim_v = head_k, head_v
    recurrent_where_no_kv_heads(anatomy)


def _plamo2_mixer(ctx: GraphContext, inp: dict[str, Tensor], cur: Tensor, il: int) -> Tensor:
    """build_plamo2_mamba_layer."""
    g, w, m = ctx.g, ctx.w, ctx.model
    ssm = m.state_space
    d_conv, d_inner, d_state, n_heads = ssm.d_conv, ssm.d_inner, ssm.d_state, ssm.dt_rank
    head_dim, dt_dim = d_inner // n_heads, max(64, m.n_embd // 16)
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    r_l, s_l = w.rs(il)
    conv = g.reshape(ctx.build_rs(inp, r_l, n_embd_r(m), n_seqs), d_conv - 1, d_inner, n_seqs)
    cur = g.reshape(cur, cur.ne[0], n_seq_tokens, n_seqs)
    zx = g.permute(ctx.mm(w.layer_req(il, "ssm_in.weight"), cur), 0, 2, 1, 3)
    zx = g.cont(zx, (head_dim * 2, n_heads, n_seq_tokens, n_seqs))
    es = zx.type.type_size
    x = g.view(zx, (head_dim, n_heads, n_seq_tokens, n_seqs), zx.nb[1:], head_dim * es)
    x = g.cont(x, (head_dim * n_heads, n_seq_tokens, n_seqs, 1))
    z = g.view(zx, (head_dim, n_heads, n_seq_tokens, n_seqs), zx.nb[1:], 0)
    conv_x = g.concat(conv, g.transpose(x), 0)
    last = g.view(conv_x, (d_conv - 1, d_inner, n_seqs), (conv_x.nb[1], conv_x.nb[2]), n_seq_tokens * conv_x.nb[0])
    g.expand(g.cpy(last, g.view(r_l, ((d_conv - 1) * d_inner * n_seqs,), (), 0)))
    x = g.op(
        "SSM_CONV",
        F32,
        (d_inner, conv_x.ne[0] - d_conv + 1, conv_x.ne[2]),
        [conv_x, w.layer_req(il, "ssm_conv1d.weight")],
    )
    x = g.unary(x)
    x_bcdt = ctx.mm(w.layer_req(il, "ssm_x.weight"), x)
    es = x_bcdt.type.type_size
    strides = (x_bcdt.nb[1], x_bcdt.nb[2])
    bb = g.view(x_bcdt, (d_state, n_seq_tokens, n_seqs), strides, 0)
    cc = g.view(x_bcdt, (d_state, n_seq_tokens, n_seqs), strides, es * d_state)
    dt = g.view(x_bcdt, (dt_dim, n_seq_tokens, n_seqs), strides, es * 2 * d_state)
    bb = ctx.build_norm(bb, w.layer(il, "ssm_b_norm"), il=il)
    cc = ctx.build_norm(cc, w.layer(il, "ssm_c_norm"), il=il)
    dt = ctx.build_norm(dt, w.layer(il, "ssm_dt_norm"), il=il)
    dt = g.add(ctx.mm(w.layer_req(il, "ssm_dt.weight"), dt), w.layer_req(il, "ssm_dt.bias"))
    a = g.reshape(w.layer_req(il, "ssm_a"), 1, n_heads)
    es = x.type.type_size
    x = g.view(
        x,
        (head_dim, n_heads, n_seq_tokens, n_seqs),
        (head_dim * es, head_dim * n_heads * es, head_dim * n_heads * n_seq_tokens * es),
        0,
    )
    bb = g.view(bb, (d_state, 1, n_seq_tokens, n_seqs), (d_state * bb.nb[0], bb.nb[1], bb.nb[2]), 0)
    cc = g.view(cc, (d_state, 1, n_seq_tokens, n_seqs), (d_state * cc.nb[0], cc.nb[1], cc.nb[2]), 0)

    def scan(states: Tensor, ids: Tensor) -> Tensor:
        ssm = g.reshape(states, d_state, head_dim, n_heads, ctx.shape.n_rs)
        n = x.n_elements() + ssm.ne[0] * ssm.ne[1] * ssm.ne[2] * ids.ne[0]
        return g.op("SSM_SCAN", F32, (n,), [ssm, x, dt, a, bb, cc, ids])

    y_ssm = ctx.build_rs(inp, s_l, n_embd_s(m), n_seqs, scan)
    n_state = n_heads * head_dim * d_state * n_seqs
    g.expand(
        g.cpy(
            g.view(y_ssm, (n_state,), (), n_heads * head_dim * n_seq_tokens * n_seqs * y_ssm.type.type_size),
            g.view(s_l, (n_state,), (), 0),
        )
    )
    y = g.view(
        y_ssm,
        (head_dim, n_heads, n_seq_tokens, n_seqs),
        (head_dim * es, head_dim * n_heads * es, head_dim * n_heads * n_seq_tokens * es),
        0,
    )
    y = g.add(y, g.mul(x, g.reshape(w.layer_req(il, "ssm_d"), 1, n_heads)))
    y = g.glu_split(g.cont(z), y)
    y = g.view(y, (head_dim * n_heads, n_seq_tokens, n_seqs), (y.nb[2], y.nb[3]), 0)
    cur = ctx.mm(w.layer_req(il, "ssm_out.weight"), y)
    return g.reshape(cur, cur.ne[0], n_seq_tokens * n_seqs)


def _plamo2_attention(
    ctx: GraphContext, inp: dict[str, Tensor | None], layer: LayerAnatomy, cur: Tensor, pos: Tensor
) -> Tensor:
    """build_plamo2_attn_layer: fused QKV, per-head Q/K norms, RoPE."""
    g, w, il = ctx.g, ctx.w, layer.index
    hd = layer.head_dim_k
    q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv, layer.head_dim_v)
    q = g.rope(ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il), pos)
    k = g.rope(ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il), pos)
    return ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v)


def build_plamo2(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        residual = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        if layer.is_recurrent:
            cur = _plamo2_mixer(ctx, rs_inp, cur, il)
        else:
            cur = _plamo2_attention(ctx, inp_attn, layer, cur, inp_pos)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            residual = g.get_rows(residual, out_ids)
        cur = ctx.build_norm(cur, w.layer(il, "post_attention_norm"), il=il)
        residual = g.add(cur, residual)
        cur = ctx.build_norm(residual, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_ffn(cur, w.layer(il, "ffn_up.weight"), None, w.layer(il, "ffn_down.weight"), "swiglu", False)
        cur = ctx.build_norm(cur, w.layer(il, "post_ffw_norm"), il=il)
        inp_l = g.add(cur, residual)
    cur = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur, w.get_optional("output.scale")))


read_hparams = _plamo2
build_graph = build_plamo2
