"""AFMoE, Arcee's Trinity (src/models/afmoe.cpp): scaled embeddings; a sliding window on 3 of every 4
layers and RoPE everywhere but the global layers; per-head Q/K norms; a sigmoid gate from the
attention's input on the attention's output before its projection; sandwich norms around attention
and FFN; a dense FFN in the leading layers, then routed experts (sigmoid by default, with a selection
bias) plus a shared expert.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import load_swa_pattern, read_experts, require
from planner.errors import GGUFError
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.hparams import GATING_SIGMOID
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _afmoe(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_afmoe::load_arch_hparams: the RMS epsilon, the experts' FFN length and the shared expert
    # count are required; a window makes 3 of every 4 layers windowed; no gating function means sigmoid.
    # n_no_rope_layer_step keeps llama_hparams' default of 4: every 4th layer goes without RoPE
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "expert_feed_forward_length", "expert_shared_count")
    n_swa = meta.int_or("attention.sliding_window", 0)
    if n_swa <= 0:  # build_attn_inp_kv_iswa on a cache without a window
        raise GGUFError(anatomy.path, "afmoe without attention.sliding_window: llama.cpp aborts building the graph")
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = n_swa
    load_swa_pattern(anatomy, meta, 4)
    anatomy.n_no_rope_layer_step = 4
    read_experts(anatomy, meta)
    if anatomy.experts is not None:
        anatomy.experts.gating_func = anatomy.experts.gating_func or GATING_SIGMOID
        anatomy.experts.n_layer_dense_lead = meta.int_or("leading_dense_block_count", 0)


def build_afmoe(ctx: GraphContext) -> None:
    """llama_model_afmoe::graph: embeddings times sqrt(n_embd); attn_norm, QKV, the gate's projection,
    Q's and K's norms, RoPE (not on every 4th layer), attention without its projection, times the
    sigmoid gate, the projection, post-attention norm, residual; ffn_norm, dense FFN or experts plus
    the shared expert, post-FFN norm, residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = g.scale(ctx.build_inp_embd())
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    out_ids = ctx.build_inp_out_ids()
    step = m.n_no_rope_layer_step
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        gate = ctx.mm(w.layer_req(il, "attn_gate.weight"), cur)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        if step > 0 and (il + 1) % step != 0:
            q = g.rope(q, inp_pos)
            k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, None, None, q, k, v, iswa=True)
        cur = ctx.mm(w.layer_req(il, "attn_output.weight"), g.mul(cur, g.unary(gate)))
        cur = ctx.build_norm(cur, w.layer(il, "post_attention_norm.weight"), il=il)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is not None:
            cur = ctx.build_routed_experts(cur, il, m.moe, shared=None)
        else:
            cur = ctx.build_layer_ffn(cur, il)
        cur = ctx.build_norm(cur, w.layer(il, "post_ffw_norm.weight"), il=il)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _afmoe
build_graph = build_afmoe
