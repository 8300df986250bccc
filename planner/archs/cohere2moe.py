"""Cohere 2 MoE (src/models/cohere2moe.cpp): Command A's parallel layer (attention and the FFN read
the same norm, both added to the residual) with routed experts after the leading dense layers and a
shared expert averaged in, a window on 3 of every 4 layers after the first of each four, RoPE on the
windowed and the leading dense layers, scaled logits. The last layer keeps every row: the output rows
are picked after the output norm, whose result stays an output (t_h_nextn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import MTP_HEADS, load_swa_pattern, read_experts, require
from planner.errors import GGUFError
from planner.ggml_graph import FLAG_OUTPUT, Tensor
from planner.graphs.blocks import attention_inputs
from planner.graphs.context import GraphContext
from planner.hparams import GATING_SIGMOID
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_cohere2moe(anatomy: ModelAnatomy, meta: Meta) -> None:
    """llama_model_cohere2moe::load_arch_hparams: an RMS epsilon makes the norms RMS norms (else layer
    norms); the window, logit scale, dense-lead count and the experts' FFN length are required."""
    if meta.get("attention.layer_norm_rms_epsilon") is None and meta.get("attention.layer_norm_epsilon") is None:
        raise GGUFError(anatomy.path, "missing Cohere2 MoE norm epsilon (llama.cpp refuses the model)")
    require(anatomy, meta, "attention.sliding_window", "logit_scale", "leading_dense_block_count")
    require(anatomy, meta, "expert_feed_forward_length")
    anatomy.mtp_loaded = MTP_HEADS
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 0)
    load_swa_pattern(anatomy, meta, 4, dense_first=True)
    anatomy.f_logit_scale = meta.float_or("logit_scale", 0.0)
    read_experts(anatomy, meta)
    if anatomy.experts is None or anatomy.experts.n_used == 0:
        raise GGUFError(anatomy.path, "n_expert and n_expert_used must be > 0 for Cohere2Moe (llama.cpp refuses it)")
    anatomy.experts.n_layer_dense_lead = meta.int_or("leading_dense_block_count", 0)
    anatomy.experts.gating_func = anatomy.experts.gating_func or GATING_SIGMOID


def _ffn(ctx: GraphContext, il: int, cur: Tensor) -> Tensor:
    """A dense SwiGLU on the leading layers; else the experts, plus the shared expert, halved."""
    g, experts = ctx.g, ctx.model.moe
    if il < experts.n_layer_dense_lead:
        return ctx.build_layer_ffn(cur, il)
    moe = ctx.build_moe_ffn(
        cur,
        il,
        experts.n_expert,
        experts.n_used,
        "silu",
        experts.weights_norm,
        experts.weights_scale,
        experts.gating,
    )
    if ctx.w.layer(il, "ffn_up_shexp.weight") is None:
        return moe
    return g.scale(g.add(moe, ctx.build_shared_expert(cur, il)))


def build_cohere2moe(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    rms = m.metadata.get(f"{m.architecture}.attention.layer_norm_rms_epsilon") is not None
    n_dense = m.moe.n_layer_dense_lead
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), rms=rms, il=il)
        ffn_inp = cur
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        if layer.is_swa or il < n_dense:
            q = g.rope(q, inp_pos, w.rope_freqs(il))
            k = g.rope(k, inp_pos, w.rope_freqs(il))
        inp = inp_swa if layer.is_swa else inp_full
        attn_out = ctx.build_attn(
            inp, layer, w.layer(il, "attn_output.weight"), w.layer(il, "attn_output.bias"), q, k, v, iswa=True
        )
        cur = g.add(_ffn(ctx, il, ffn_inp), inp_l)
        inp_l = g.add(cur, attn_out)
    cur = ctx.build_norm(inp_l, w.get("output_norm.weight"), rms=rms)
    cur.flags |= FLAG_OUTPUT  # res->t_h_nextn
    cur = g.get_rows(cur, out_ids)
    logits = ctx.mm(ctx.output_weight(), cur)
    if m.f_logit_scale:
        logits = g.scale(logits)
    ctx.set_outputs(cur, logits)


read_hparams = read_cohere2moe
build_graph = build_cohere2moe
