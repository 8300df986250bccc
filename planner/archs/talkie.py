"""Talkie (src/models/talkie.cpp): weightless RMS norms everywhere, a learned per-head scale on Q's norm
after RoPE (K's norm has none), a SwiGLU FFN, the normalised input embedding added back to every
layer's output through a learned scalar, and scaled logits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require, require_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _talkie(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_talkie::load_arch_hparams: the RMS epsilon and the logit scale are required
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "logit_scale")
    anatomy.f_logit_scale = meta.float_or("logit_scale", 0.0)
    require_output(anatomy)


def build_talkie(ctx: GraphContext) -> None:
    """llama_model_talkie::graph: the embeddings' norm (kept as the skip input); per layer a norm, QKV,
    RoPE on Q and K, Q's scaled norm and K's plain norm, attention, residual; a norm, SwiGLU, residual,
    plus the skip input times the layer's scale; a final norm, the output matrix, the logit scale."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_norm(ctx.build_inp_embd(), None)
    embd_skip = inp_l
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa, inp_skip = inp_l, embd_skip
        cur = ctx.build_norm(inp_l, None, il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, None, il=il)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
            inp_skip = g.get_rows(inp_skip, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, None, il=il)
        cur = g.add(ctx.build_layer_ffn(cur, il), ffn_inp)
        inp_l = g.add(cur, g.mul(inp_skip, w.layer_req(il, "layer_output_scale.weight")))
    cur = ctx.build_norm(inp_l, None)
    embd = cur
    cur = g.scale(ctx.mm(ctx.output_weight(), cur))
    ctx.set_outputs(embd, cur)


read_hparams = _talkie
build_graph = build_talkie
