"""OLMo 2 / Olmo 3 and EXAONE 4 (src/models/olmo2.cpp, exaone4.cpp): post-norm layers with Q/K norms;
the windowed variants attend within a window on 3 of every 4 layers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    load_swa_pattern,
)
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _olmo2(anatomy: ModelAnatomy, meta: Meta) -> None:
    # Olmo 3 declares a sliding window: 3 of every 4 layers use it (llama_model_olmo2::load_arch_hparams)
    n_swa = meta.int_or("attention.sliding_window", 0)
    if n_swa > 0:
        anatomy.swa_type = SWA_STANDARD
        anatomy.n_swa = n_swa
        load_swa_pattern(anatomy, meta, 4)


def _exaone4(anatomy: ModelAnatomy, meta: Meta) -> None:
    # only the 64-layer (32B) model has windowed layers, 3 of every 4 (llama_model_exaone4::load_arch_hparams)
    if anatomy.n_layer == 64:
        anatomy.swa_type = SWA_STANDARD
        anatomy.n_swa = meta.int_or("attention.sliding_window", 4096)
        load_swa_pattern(anatomy, meta, 4)


def build_olmo2(ctx: GraphContext) -> None:
    """olmo2 (and Olmo 3's sliding-window layers) and exaone4: no pre-norms; Q/K normed (olmo2 over the
    whole projection, exaone4 per head), then RoPE (exaone4 with a window: on the windowed layers only);
    the attention and FFN outputs are normed before each residual (llama_model_olmo2, _exaone4)."""
    g, w, m = ctx.g, ctx.w, ctx.model
    iswa = m.has_swa
    per_head = m.architecture == "exaone4"
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, inp_l, hd, layer.n_head, hd, layer.n_head_kv, reshape=per_head)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        if not per_head:
            q = g.reshape(q, hd, layer.n_head, ctx.n_tokens)
            k = g.reshape(k, hd, layer.n_head_kv, ctx.n_tokens)
            v = g.reshape(v, hd, layer.n_head_kv, ctx.n_tokens)
        if not (per_head and iswa and not layer.is_swa):
            freqs = w.rope_freqs(il)
            q = g.rope(q, inp_pos, freqs)
            k = g.rope(k, inp_pos, freqs)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=iswa)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        cur = ctx.build_norm(cur, w.layer(il, "post_attention_norm.weight"), il=il)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_layer_ffn(ffn_inp, il)
        cur = ctx.build_norm(cur, w.layer(il, "post_ffw_norm.weight"), il=il)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


def read_hparams(anatomy: ModelAnatomy, meta: Meta) -> None:
    (_exaone4 if anatomy.architecture == "exaone4" else _olmo2)(anatomy, meta)


build_graph = build_olmo2
