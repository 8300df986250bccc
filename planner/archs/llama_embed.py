"""Llama as a text encoder (src/models/llama-embed.cpp: llama.cpp's llama graph built for embeddings):
llama's layers with attention over the micro-batch alone (no KV cache read, though llama.cpp still
allocates one), and no output matrix: the graph ends at the output norm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import read_experts, require
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _llama_embed(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_llama::load_arch_hparams (inherited): the RMS epsilon is required
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    read_experts(anatomy, meta)


def build_llama_embed(ctx: GraphContext) -> None:
    """llama_model_llama::graph<true>: attn_norm, QKV, RoPE, attention over the batch's own tokens,
    residual; ffn_norm, SwiGLU (or softmax-routed experts), residual; the output norm is the result."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    mask = ctx.build_attn_inp_no_cache()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = g.rope(q, inp_pos, w.rope_freqs(il))
        k = g.rope(k, inp_pos, w.rope_freqs(il))
        cur = ctx.build_attn_no_cache(mask, w.layer(il, "attn_output.weight"), w.layer(il, "attn_output.bias"), q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is None:
            cur = ctx.build_ffn(
                cur,
                w.layer(il, "ffn_up.weight"),
                w.layer(il, "ffn_gate.weight"),
                w.layer(il, "ffn_down.weight"),
                up_b=w.layer(il, "ffn_up.bias"),
                gate_b=w.layer(il, "ffn_gate.bias"),
                down_b=w.layer(il, "ffn_down.bias"),
            )
        else:
            cur = ctx.build_moe_ffn(cur, il, m.moe.n_expert, m.moe.n_used, w_scale=m.moe.weights_scale)
        inp_l = g.add(cur, ffn_inp)
    cur = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    ctx.set_outputs(cur, None)


read_hparams = _llama_embed
build_graph = build_llama_embed
