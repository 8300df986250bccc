"""Mixture-of-experts decoders of 2024 (src/models/deepseek.cpp, arctic.cpp, dbrx.cpp, grok.cpp): llama's
attention with routed experts, each its own way. DeepSeek V1: experts after the leading dense layers
plus an ungated shared expert; Arctic: a dense FFN and the experts side by side, the experts reading the
layer's input through their own norm; DBRX: layer norms, a fused and clamped QKV projection, experts
on every layer; Grok: attention logits soft-capped without flash attention, a norm after attention
and after the experts (GELU), an optional dense FFN averaged in, scaled logits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import read_experts, require
from planner.errors import GGUFError
from planner.ggml_graph import Tensor
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext
from planner.model import LayerAnatomy

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_moe_decoder(anatomy: ModelAnatomy, meta: Meta) -> None:
    """The keys each loader requires, and the experts (they refuse a model with none)."""
    arch = anatomy.architecture
    if arch == "dbrx":
        require(anatomy, meta, "attention.layer_norm_epsilon", "attention.clamp_kqv")
        anatomy.f_clamp_kqv = meta.float_or("attention.clamp_kqv", 0.0)
    else:
        require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    if arch == "deepseek":
        require(anatomy, meta, "expert_feed_forward_length", "expert_shared_count")
    read_experts(anatomy, meta)
    if anatomy.experts is None:
        raise GGUFError(anatomy.path, f"{arch} model cannot have zero experts (llama.cpp refuses it)")
    if arch == "deepseek":
        anatomy.experts.n_layer_dense_lead = meta.int_or("leading_dense_block_count", 0)
    if arch == "grok":  # llama_model_grok's defaults for old files; llama.cpp runs it without flash attention
        anatomy.flash_attn_off = True
        anatomy.notes.append("llama.cpp forces flash attention off for Grok")
        anatomy.f_logit_scale = meta.float_or("logit_scale", 0.5773502691896257)
        anatomy.f_final_softcap = meta.float_or("final_logit_softcapping", 0.0)


def _attention(
    ctx: GraphContext, inp: dict[str, Tensor | None], pos: Tensor, layer: LayerAnatomy, cur: Tensor
) -> Tensor:
    g, w, il, hd = ctx.g, ctx.w, layer.index, layer.head_dim_k
    q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
    freqs = w.rope_freqs(il)
    q = g.rope(q, pos, freqs)
    k = g.rope(k, pos, freqs)
    wo, wo_b = w.layer(il, "attn_output.weight"), w.layer(il, "attn_output.bias")
    return ctx.build_attn(inp, layer, wo, wo_b, q, k, v, softcap=ctx.model.architecture == "grok")


def _experts(ctx: GraphContext, il: int, cur: Tensor, act: str, norm_w: bool) -> Tensor:
    moe = ctx.model.moe
    return ctx.build_moe_ffn(cur, il, moe.n_expert, moe.n_used, act, norm_w, moe.weights_scale, "softmax")


def _ffn(ctx: GraphContext, il: int, ffn_inp: Tensor, inp_sa: Tensor) -> Tensor:
    """From the attention's residual to the layer's output."""
    g, w, m = ctx.g, ctx.w, ctx.model
    arch = m.architecture
    if arch == "dbrx":
        cur = ctx.build_norm(ffn_inp, w.layer(il, "attn_output_norm.weight"), rms=False, il=il)
        return g.add(_experts(ctx, il, cur, "silu", True), ffn_inp)
    cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
    if arch == "arctic":  # the dense FFN, then the experts on the layer's input, both added
        ffn_out = g.add(ctx.build_layer_ffn(cur, il), ffn_inp)
        cur = ctx.build_norm(inp_sa, w.layer(il, "ffn_norm_exps.weight"), il=il)
        return g.add(_experts(ctx, il, cur, "silu", True), ffn_out)
    if arch == "grok":
        moe = _experts(ctx, il, cur, "gelu", True)
        if w.layer(il, "ffn_up.weight") is not None:
            dense = ctx.build_ffn(
                cur,
                w.layer(il, "ffn_up.weight"),
                w.layer(il, "ffn_gate.weight"),
                w.layer(il, "ffn_down.weight"),
                "gelu",
            )
            moe = g.scale(g.add(dense, moe))
        post = w.layer(il, "layer_output_norm.weight") or w.layer(il, "post_ffw_norm.weight")
        return g.add(ctx.build_norm(moe, post, il=il), ffn_inp)
    # deepseek: the leading dense layers, then experts plus the ungated shared expert
    if il < m.moe.n_layer_dense_lead:
        return g.add(ctx.build_layer_ffn(cur, il), ffn_inp)
    moe = g.add(_experts(ctx, il, cur, "silu", False), ctx.build_shared_expert(cur, il))
    return g.add(moe, ffn_inp)


def build_moe_decoder(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    rms = m.architecture != "dbrx"
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), rms=rms, il=il)
        cur = _attention(ctx, inp_attn, inp_pos, layer, cur)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        if m.architecture == "grok":
            cur = ctx.build_norm(cur, w.layer(il, "attn_output_norm.weight"), il=il)
        inp_l = _ffn(ctx, il, g.add(cur, inp_sa), inp_sa)
    if m.architecture != "grok":
        final_output(ctx, inp_l, rms=rms)
        return
    cur = ctx.build_norm(inp_l, w.get("output_norm.weight"))
    logits = g.scale(ctx.mm(ctx.output_weight(), cur))
    if m.f_final_softcap:
        logits = g.scale(g.unary(g.scale(logits)))
    ctx.set_outputs(cur, logits)


read_hparams = read_moe_decoder
build_graph = build_moe_decoder
