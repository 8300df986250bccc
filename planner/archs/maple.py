"""Maple (src/models/maple.cpp): per-head Q/K norms, a window on the layers the header's per-layer
pattern names and RoPE on those only, routed experts on every layer (softmax, normalised weights;
the experts' SwiGLU clamped at the header's limit, still one GLU node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import load_swa_pattern, read_experts, require
from planner.errors import GGUFError
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_maple(anatomy: ModelAnatomy, meta: Meta) -> None:
    """llama_model_maple::load_arch_hparams: the window, its per-layer pattern, the experts' FFN length and
    their SwiGLU clamp are all required; load_arch_tensors refuses a model without experts."""
    require(
        anatomy,
        meta,
        "attention.layer_norm_rms_epsilon",
        "attention.sliding_window",
        "attention.sliding_window_pattern",
        "expert_feed_forward_length",
        "swiglu_clamp_exp",
    )
    if not isinstance(meta.get("attention.sliding_window_pattern"), list):
        raise GGUFError(anatomy.path, "maple.attention.sliding_window_pattern must be an array (llama.cpp refuses it)")
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 0)
    load_swa_pattern(anatomy, meta, 0)
    read_experts(anatomy, meta)
    if anatomy.experts is None or anatomy.experts.n_used == 0:
        raise GGUFError(anatomy.path, "n_expert and n_expert_used must be > 0 for Maple (llama.cpp refuses the model)")


def build_maple(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        if layer.is_swa:
            q = g.rope(q, inp_pos)
            k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=True)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_moe_ffn(cur, il, m.moe.n_expert, m.moe.n_used, "silu", True, 1.0, "softmax")
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = read_maple
build_graph = build_maple
