"""Gemma 1 to 3 (src/models/gemma.cpp, gemma2-iswa.cpp, gemma3.cpp): scaled embeddings, GELU FFN,
sandwich norms from Gemma 2 on, a sliding window on most layers and soft-capped logits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    load_swa_pattern,
    plain,
)
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _gemma2(anatomy: ModelAnatomy, meta: Meta) -> None:
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 4096)
    load_swa_pattern(anatomy, meta, 2)
    anatomy.f_attn_softcap = meta.float_or("attn_logit_softcapping", 0.0)
    anatomy.f_final_softcap = meta.float_or("final_logit_softcapping", 0.0)


def _gemma3(anatomy: ModelAnatomy, meta: Meta) -> None:
    n_swa = meta.int_or("attention.sliding_window", 0)
    if n_swa > 0:
        anatomy.swa_type = SWA_STANDARD
        anatomy.n_swa = n_swa
        load_swa_pattern(anatomy, meta, 6)
    anatomy.f_final_softcap = meta.float_or("final_logit_softcapping", 0.0)


def build_gemma(ctx: GraphContext) -> None:
    """gemma (v1): scaled embeddings, GELU feed-forward, dense attention."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_l = g.scale(inp_l)
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        q, k, v = ctx.build_qkv(layer, cur, layer.head_dim_k, layer.n_head, layer.head_dim_k, layer.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        q = g.scale(q)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        sa_out = g.add(cur, inp_l)
        cur = ctx.build_norm(sa_out, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_ffn(
            cur,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            w.layer(il, "ffn_down.weight"),
            "gelu",
            True,
        )
        inp_l = g.add(cur, sa_out)
    final_output(ctx, inp_l)


def build_gemma2_3(ctx: GraphContext) -> None:
    """gemma2 and gemma3: post-norms, sliding-window layers, optional logit soft-capping."""
    g, w, m = ctx.g, ctx.w, ctx.model
    gemma3 = m.architecture == "gemma3"
    iswa = m.has_swa
    inp_l = ctx.build_inp_embd()
    inp_l = g.scale(inp_l)
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        q, k, v = ctx.build_qkv(layer, cur, layer.head_dim_k, layer.n_head, layer.head_dim_k, layer.n_head_kv)
        if gemma3:
            q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        q = g.rope(q, inp_pos)
        if gemma3:
            k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        k = g.rope(k, inp_pos)
        q = g.scale(q)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(
            inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=iswa, softcap=m.f_attn_softcap > 0
        )
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        cur = ctx.build_norm(cur, w.layer(il, "post_attention_norm.weight"), il=il)
        sa_out = g.add(cur, inp_l)
        cur = ctx.build_norm(sa_out, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_ffn(
            cur,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            w.layer(il, "ffn_down.weight"),
            "gelu",
            True,
        )
        cur = ctx.build_norm(cur, w.layer(il, "post_ffw_norm.weight"))  # il = -1 in llama.cpp: not pinned
        inp_l = g.add(cur, sa_out)
    final_output(ctx, inp_l, softcap=m.f_final_softcap > 0)


_RULES = {"gemma": plain, "gemma2": _gemma2, "gemma3": _gemma3}


def read_hparams(anatomy: ModelAnatomy, meta: Meta) -> None:
    _RULES[anatomy.architecture](anatomy, meta)


def build_graph(ctx: GraphContext) -> None:
    (build_gemma if ctx.model.architecture == "gemma" else build_gemma2_3)(ctx)
