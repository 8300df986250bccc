"""Muse Glimmer (src/models/muse-glimmer.cpp): normed embeddings, a window on 3 of every 4 layers and
RoPE on those only, per-head Q/K norms, a sigmoid gate on the attention output before its projection,
sandwich norms, a SwiGLU FFN, scaled and optionally soft-capped logits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import load_swa_pattern, require
from planner.graphs.blocks import attention_inputs
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_muse_glimmer(anatomy: ModelAnatomy, meta: Meta) -> None:
    """llama_model_muse_glimmer::load_arch_hparams: the window and the logit scale are required."""
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "attention.sliding_window", "logit_scale")
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 0)
    load_swa_pattern(anatomy, meta, 4)
    anatomy.f_logit_scale = meta.float_or("logit_scale", 0.0)
    anatomy.f_final_softcap = meta.float_or("final_logit_softcapping", 0.0)


def build_muse_glimmer(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    iswa = m.has_swa
    inp_l = ctx.build_inp_embd()
    inp_l = g.rms_norm(inp_l)
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        gate = ctx.mm(w.layer_req(il, "attn_gate.weight"), cur)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        if layer.is_swa:  # NoPE on the full-attention layers
            q = g.rope(q, inp_pos)
            k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, None, None, q, k, v, iswa=iswa)
        cur = g.mul(cur, g.unary(gate))
        cur = ctx.mm(w.layer_req(il, "attn_output.weight"), cur)
        cur = g.mul(g.rms_norm(cur), w.layer_req(il, "post_attention_norm.weight"))
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_layer_ffn(cur, il)
        cur = g.mul(g.rms_norm(cur), w.layer_req(il, "post_ffw_norm.weight"))
        inp_l = g.add(cur, ffn_inp)
    cur = ctx.build_norm(inp_l, w.get("output_norm.weight"))
    logits = g.scale(ctx.mm(ctx.output_weight(), cur))
    if m.f_final_softcap:
        logits = g.scale(g.unary(g.scale(logits)))
    ctx.set_outputs(cur, logits)


read_hparams = read_muse_glimmer
build_graph = build_muse_glimmer
