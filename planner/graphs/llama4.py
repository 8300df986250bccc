"""Llama 4's graph (src/models/llama4.cpp).

The llama block with three changes: three of every four layers attend within 8,192-token chunks
(a sliding-window cache) and the fourth is global without RoPE, its queries scaled by an
attention-temperature input instead; RoPE layers L2-normalise Q and K (RMS norm, no weight) unless
the model has 128 experts; and every `interleave_moe_layer_step`-th layer is a sigmoid-routed
mixture of experts that weighs each expert's input, plus a shared expert of the same width.
"""

from __future__ import annotations

from planner.ggml_types import F32
from planner.graphs.context import GraphContext
from planner.graphs.dense import _attention_inputs, _final


def build_llama4(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    iswa = m.has_swa
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    attn_scale = g.input(F32, (1, 1, ctx.n_tokens), "inp_attn_scale")  # temperature tuning
    inp_full, inp_swa = _attention_inputs(ctx, iswa)
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
            freqs = w.get_optional("rope_freqs.weight")
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
            shared = ctx.build_ffn(
                normed,
                w.layer(il, "ffn_up_shexp.weight"),
                w.layer(il, "ffn_gate_shexp.weight"),
                w.layer(il, "ffn_down_shexp.weight"),
            )
            cur = g.add(moe, shared)
        inp_l = g.add(cur, ffn_inp)
    _final(ctx, inp_l)
