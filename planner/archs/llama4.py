"""Llama 4 (src/models/llama4.cpp): chunked attention on 3 of every 4 layers, the 4th without RoPE,
experts every n-th layer beside a shared expert.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    load_swa_pattern,
    read_experts,
)
from planner.errors import GGUFError
from planner.ggml_graph import F32
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.model import SWA_CHUNKED

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _llama4(anatomy: ModelAnatomy, meta: Meta) -> None:
    """llama_model_llama4::load_arch_hparams: experts every n-th layer; without a sliding-window key (or
    with one that is not 0) three of every four layers attend within 8,192-token chunks and every
    fourth has no RoPE; a window of 0 turns both off."""
    read_experts(anatomy, meta)
    if anatomy.experts is None:
        raise GGUFError(meta.path, "llama4 model cannot have zero experts (llama.cpp refuses it)")
    step = meta.get("interleave_moe_layer_step")
    if isinstance(step, bool) or not isinstance(step, int):
        raise GGUFError(meta.path, "required metadata llama4.interleave_moe_layer_step is missing")
    anatomy.experts.moe_layer_step = step
    window = meta.get("attention.sliding_window")
    if window is not None and meta.int_or("attention.sliding_window", 0) == 0:
        anatomy.n_no_rope_layer_step = anatomy.n_layer  # RoPE on every layer but the last
    else:
        anatomy.swa_type = SWA_CHUNKED
        anatomy.n_swa = 8192
        anatomy.n_no_rope_layer_step = 4
        load_swa_pattern(anatomy, meta, 4)
    anatomy.use_kq_norm = anatomy.experts.n_expert != 128  # LLM_TYPE_17B_128E has none


def build_llama4(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    iswa = m.has_swa
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    attn_scale = g.input(F32, (1, 1, ctx.n_tokens), "inp_attn_scale")  # temperature tuning
    inp_full, inp_swa = attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    no_rope_step = m.n_no_rope_layer_step
    use_kq_norm = m.use_kq_norm
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        use_rope = no_rope_step > 0 and (il + 1) % no_rope_step != 0
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        if use_rope:
            freqs = w.rope_freqs(il)
            q = g.rope(q, inp_pos, freqs)
            k = g.rope(k, inp_pos, freqs)
        else:
            q = g.mul(q, attn_scale)
        if use_rope and use_kq_norm:
            q = g.rms_norm(q)
            k = g.rms_norm(k)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=iswa)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        normed = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is None:
            cur = ctx.build_ffn(
                normed, w.layer(il, "ffn_up.weight"), w.layer(il, "ffn_gate.weight"), w.layer(il, "ffn_down.weight")
            )
        else:
            moe = ctx.build_moe_ffn(
                normed,
                il,
                m.moe.n_expert,
                m.moe.n_used,
                "silu",
                False,
                m.moe.weights_scale,
                "sigmoid",
                weight_before_ffn=True,
            )
            shared = ctx.build_shared_expert(normed, il)
            cur = g.add(moe, shared)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _llama4
build_graph = build_llama4
