"""Laguna (src/models/laguna.cpp): per-layer head counts; with a window in the header, 3 of every 4
layers windowed (the first of each four global); per-head Q/K norms before RoPE; a softplus gate from
the attention's input, per head or per value, on the attention's output before its projection; a
dense FFN in the leading layers, then routed experts (sigmoid by default, with a selection bias)
plus a shared expert.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import load_swa_pattern, read_experts, require
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.hparams import GATING_SIGMOID
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _laguna(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_laguna::load_arch_hparams: the RMS epsilon, the leading dense block count and the
    # experts' FFN length are required; no gating function means sigmoid
    require(
        anatomy, meta, "attention.layer_norm_rms_epsilon", "leading_dense_block_count", "expert_feed_forward_length"
    )
    n_swa = meta.int_or("attention.sliding_window", 0)
    if n_swa > 0:
        anatomy.swa_type = SWA_STANDARD
        anatomy.n_swa = n_swa
        load_swa_pattern(anatomy, meta, 4, dense_first=True)
    read_experts(anatomy, meta)
    if anatomy.experts is not None:
        anatomy.experts.gating_func = anatomy.experts.gating_func or GATING_SIGMOID
        anatomy.experts.n_layer_dense_lead = meta.int_or("leading_dense_block_count", 0)


def build_laguna(ctx: GraphContext) -> None:
    """llama_model_laguna::graph: attn_norm, QKV with the layer's heads, the gate's projection, Q's and
    K's norms, RoPE, attention without its projection, times the softplus gate (per head or per value),
    the projection, residual; ffn_norm, dense FFN or experts plus the shared expert, residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    iswa = m.swa_type != "none"
    inp_full, inp_swa = attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd, n_head = layer.head_dim_v, layer.n_head
        q, k, v = ctx.build_qkv(layer, cur, hd, n_head, hd, layer.n_head_kv)
        gate_w = w.layer_req(il, "attn_gate.weight")
        gate = ctx.mm(gate_w, cur)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, None, None, q, k, v, iswa=iswa)
        gate = g.unary(gate)
        if gate_w.ne[1] == n_head:
            n_tok = cur.ne[1]
            cur = g.mul(g.reshape(cur, hd, n_head, n_tok), g.reshape(gate, 1, n_head, n_tok))
            cur = g.reshape(cur, hd * n_head, n_tok)
        else:
            cur = g.mul(cur, gate)
        cur = ctx.mm(w.layer_req(il, "attn_output.weight"), cur)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is not None:
            cur = ctx.build_routed_experts(cur, il, m.moe, shared=True)
        else:
            cur = ctx.build_layer_ffn(cur, il)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _laguna
build_graph = build_laguna
