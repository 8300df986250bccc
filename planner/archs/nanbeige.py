"""Nanbeige (src/models/nanbeige.cpp): llama's layers; a looped release runs its physical layers
num_loops times, each pass a layer of its own to llama.cpp (n_layer is physical x loops, every pass
with a KV cache) over the same weights, with the output norm between passes unless
skip_loop_final_norm.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.errors import GGUFError
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _loops(model: ModelAnatomy) -> int:
    value = model.metadata.get(f"{model.architecture}.num_loops", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _nanbeige(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_nanbeige::load_arch_hparams: the RMS epsilon is required; with num_loops > 1 the layer
    # count becomes physical x loops, each pass with the physical layer's heads and sizes (no tensors)
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    loops = _loops(anatomy)
    if loops < 1:
        raise GGUFError(anatomy.path, f"nanbeige: num_loops {loops} (llama.cpp aborts: it needs at least 1)")
    phys = anatomy.layers
    anatomy.layers = phys + [
        replace(layer, index=j * len(phys) + layer.index, tensors=[]) for j in range(1, loops) for layer in phys
    ]
    anatomy.n_layer = len(anatomy.layers)


def build_nanbeige(ctx: GraphContext) -> None:
    """llama_model_nanbeige::graph: per pass of a physical layer attn_norm, QKV, RoPE, attention,
    residual; ffn_norm, SwiGLU, residual; the output norm after each loop but the last (unless
    skip_loop_final_norm); the output norm and LM head."""
    g, w, m = ctx.g, ctx.w, ctx.model
    loops = _loops(m)
    phys = m.n_layer // loops
    skip_norm = bool(m.metadata.get(f"{m.architecture}.skip_loop_final_norm", False))
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    freqs = w.get_optional("rope_freqs.weight")
    for layer in m.trunk_layers:
        il, bid = layer.index, layer.index % phys
        weights = m.layers[bid]
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(bid, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(weights, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = g.rope(q, inp_pos, freqs)
        k = g.rope(k, inp_pos, freqs)
        cur = ctx.build_attn(
            inp_attn, layer, w.layer(bid, "attn_output.weight"), w.layer(bid, "attn_output.bias"), q, k, v
        )
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(bid, "ffn_norm.weight"), il=il)
        inp_l = g.add(ctx.build_layer_ffn(cur, bid), ffn_inp)
        if loops > 1 and (il + 1) % phys == 0 and il + 1 < m.n_trunk and not skip_norm:
            inp_l = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"), il=il)
    final_output(ctx, inp_l)


read_hparams = _nanbeige
build_graph = build_nanbeige
