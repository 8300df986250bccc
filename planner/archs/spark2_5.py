"""Spark 2.5 (src/models/spark2-5.cpp): a sliding window on the layers an explicit per-layer array names,
per-layer head counts, a sigmoid gate per query head (from the attention's input) on the attention's
output before its projection, and a GELU-gated FFN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.errors import GGUFError
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _spark2_5(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_spark2_5::load_arch_hparams: the RMS epsilon, the window and the per-layer window array
    # are required (get_arr: an array, its first entries name the windowed layers, the rest are global)
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "attention.sliding_window")
    pattern = meta.get("attention.sliding_window_pattern")
    if not isinstance(pattern, list):
        key = f"{anatomy.architecture}.attention.sliding_window_pattern"
        raise GGUFError(anatomy.path, f"array key not found in model: {key} (llama.cpp refuses the model)")
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 0)
    for layer in anatomy.layers:
        layer.is_swa = layer.index < len(pattern) and bool(pattern[layer.index])


def build_spark2_5(ctx: GraphContext) -> None:
    """llama_model_spark2_5::graph: attn_norm, QKV with the layer's heads, RoPE, attention without its
    projection, times the sigmoid of the per-head gate, the projection, residual; ffn_norm, GELU-gated
    FFN, residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        attn_inp = cur
        hd = layer.head_dim_v
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, None, None, q, k, v, iswa=True)
        gate = g.unary(ctx.mm(w.layer_req(il, "attn_gate.weight"), attn_inp))
        n_tok = cur.ne[1]
        cur = g.mul(g.reshape(cur, hd, layer.n_head, n_tok), g.reshape(gate, 1, layer.n_head, n_tok))
        cur = ctx.mm(w.layer_req(il, "attn_output.weight"), g.reshape(cur, hd * layer.n_head, n_tok))
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        ffn = ctx.build_ffn(
            cur, w.layer(il, "ffn_up.weight"), w.layer(il, "ffn_gate.weight"), w.layer(il, "ffn_down.weight"), "gelu"
        )
        inp_l = g.add(ffn, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _spark2_5
build_graph = build_spark2_5
