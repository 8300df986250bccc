"""Phi-3 (src/models/phi3.cpp): a fused QKV projection, a fused gate/up FFN, no sliding window. PhiMoE
(phimoe.cpp, built by phi3's graph) has layer norms with biases, routed experts and an output bias."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import read_experts
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _phi3(anatomy: ModelAnatomy, meta: Meta) -> None:
    if anatomy.architecture == "phimoe":  # no window; experts on every layer
        read_experts(anatomy, meta)
        return
    # llama.cpp disables Phi's sliding window (set_swa_pattern(1): no layer is SWA).
    anatomy.notes.append("Phi-3 sliding window is disabled in this llama.cpp build: full KV cache on every layer")


def build_phi3(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        residual = inp_l
        normed = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), w.layer(il, "attn_norm.bias"), il=il)
        q, k, v = ctx.build_qkv(layer, normed, layer.head_dim_k, layer.n_head, layer.head_dim_k, layer.n_head_kv)
        factors = w.rope_freqs(il, "rope_factors_long.weight")
        q = g.rope(q, inp_pos, factors)
        k = g.rope(k, inp_pos, factors)
        q = g.scale(q)
        cur = ctx.build_attn(
            inp_attn, layer, w.layer(il, "attn_output.weight"), w.layer(il, "attn_output.bias"), q, k, v
        )
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            residual = g.get_rows(residual, out_ids)
        cur = g.add(cur, residual)
        residual = cur
        cur = ctx.build_norm(cur, w.layer(il, "ffn_norm.weight"), w.layer(il, "ffn_norm.bias"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is None:
            cur = ctx.build_ffn(
                cur, w.layer(il, "ffn_up.weight"), None, w.layer(il, "ffn_down.weight"), "swiglu", False
            )
        else:  # PhiMoE
            moe = m.moe
            cur = ctx.build_moe_ffn(cur, il, moe.n_expert, moe.n_used, "silu", True, moe.weights_scale, "softmax")
        inp_l = g.add(residual, cur)
    final_output(ctx, inp_l, output_bias=True)


read_hparams = _phi3
build_graph = build_phi3
