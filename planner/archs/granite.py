"""Granite and Granite MoE (src/models/granite.cpp): llama's layers with four scales, each a
ggml_scale node; the attention and FFN pieces are shared with Granite hybrid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_experts,
)
from planner.errors import GGUFError
from planner.ggml_graph import Tensor
from planner.graphs.context import GraphContext
from planner.hparams import (
    GraniteScales,
)
from planner.model import LayerAnatomy

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def granite_scales(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Granite's scales (embedding, residual, attention, logits), each a ggml_scale node in the graph."""
    read_experts(anatomy, meta)
    anatomy.f_logit_scale = meta.float_or("logit_scale", 0.0)
    anatomy.granite = GraniteScales(
        residual=meta.float_or("residual_scale", 0.0),
        embedding=meta.float_or("embedding_scale", 0.0),
        attention=meta.float_or("attention.scale", 0.0),
    )


def _granite_moe(anatomy: ModelAnatomy, meta: Meta) -> None:
    if meta.get("logit_scale") is None:
        raise GGUFError(
            anatomy.path,
            f"required metadata {anatomy.architecture}.logit_scale is missing (llama.cpp refuses the model)",
        )
    granite_scales(anatomy, meta)


def _granite(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Granite uses rope_finetuned (default true) as a switch for RoPE; granitemoe always ropes."""
    _granite_moe(anatomy, meta)
    anatomy.use_rope = bool(meta.get("rope.scaling.finetuned", True))


def granite_attention(
    ctx: GraphContext, inp_attn: dict[str, Tensor | None], inp_pos: Tensor | None, layer: LayerAnatomy, cur: Tensor
) -> Tensor:
    """build_attention_layer: Q/K/V, RoPE when enabled, attention (the kq scale is no extra node)."""
    w, il = ctx.w, layer.index
    freqs = w.rope_freqs(il) if inp_pos is not None else None
    return ctx.build_plain_attn(inp_attn, layer, cur, inp_pos, w.layer(il, "attn_output.bias"), freqs)


def granite_ffn(ctx: GraphContext, cur: Tensor, inp_sa: Tensor, il: int) -> Tensor:
    """build_layer_ffn: residual-scaled attention output, then a dense or MoE block, scaled again."""
    g, w, m = ctx.g, ctx.w, ctx.model
    if m.granite_scales.residual:
        cur = g.scale(cur)
    ffn_inp = g.add(cur, inp_sa)
    cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
    if w.layer(il, "ffn_gate_inp.weight") is None:
        cur = ctx.build_ffn(
            cur,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            w.layer(il, "ffn_down.weight"),
            "silu",
            True,
            up_b=w.layer(il, "ffn_up.bias"),
            gate_b=w.layer(il, "ffn_gate.bias"),
            down_b=w.layer(il, "ffn_down.bias"),
        )
    else:
        moe = ctx.build_moe_ffn(cur, il, m.moe.n_expert, m.moe.n_used, "silu", True, m.moe.weights_scale)
        if w.layer(il, "ffn_up_shexp.weight") is not None:
            shared = ctx.build_shared_expert(cur, il)
            moe = g.add(moe, shared)
        cur = moe
    if m.granite_scales.residual:
        cur = g.scale(cur)
    return g.add(cur, ffn_inp)


def granite_output(ctx: GraphContext, cur: Tensor, logit_scale: bool, rms: bool = True) -> None:
    """Output norm (RMS, or a layer norm where `rms` is off), LM head and the 1/logit_scale node (granite
    always has one, the hybrid when set)."""
    g, w = ctx.g, ctx.w
    cur = ctx.build_norm(cur, w.get_optional("output_norm.weight"), rms=rms)
    logits = ctx.mm(ctx.output_weight(), cur, w.get_optional("output.scale"))
    if logit_scale:
        logits = g.scale(logits)
    ctx.set_outputs(cur, logits)


def build_granite(ctx: GraphContext) -> None:
    g, m = ctx.g, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos() if m.use_rope else None
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, ctx.w.layer(il, "attn_norm.weight"), il=il)
        cur = granite_attention(ctx, inp_attn, inp_pos, layer, cur)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        inp_l = granite_ffn(ctx, cur, inp_sa, il)
    granite_output(ctx, inp_l, logit_scale=True)


def read_hparams(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Granite uses rope_finetuned (default true) as a switch for RoPE; granitemoe always ropes."""
    (_granite if anatomy.architecture == "granite" else _granite_moe)(anatomy, meta)


build_graph = build_granite
