"""Attention and FFN side by side on one norm (src/models/cohere2-iswa.cpp, command-r.cpp, phi2.cpp,
falcon.cpp); Cohere 2 adds a sliding window on 3 of every 4 layers and scaled logits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    load_swa_pattern,
    plain,
)
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _cohere2(anatomy: ModelAnatomy, meta: Meta) -> None:
    # every 4th layer is global (no RoPE), the rest windowed; logits scaled (llama_model_cohere2)
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 4096)
    load_swa_pattern(anatomy, meta, 4)
    anatomy.f_logit_scale = meta.float_or("logit_scale", 0.0)


def _command_r(anatomy: ModelAnatomy, meta: Meta) -> None:
    # cohere2's parallel layer without the window, logits scaled when the header says so
    anatomy.f_logit_scale = meta.float_or("logit_scale", 0.0)


def build_cohere2(ctx: GraphContext) -> None:
    """cohere2 (Command R7B), command-r, phi2 and falcon: one layer norm feeds attention and the FFN side
    by side, both added to the residual. cohere2: RoPE on the windowed layers only, a SwiGLU FFN, scaled logits
    (llama_model_cohere2); phi2: RoPE everywhere, Q scaled, biases, a GELU FFN, an output bias."""
    from planner.archs.granite import granite_output

    g, w, m = ctx.g, ctx.w, ctx.model
    phi2 = m.architecture == "phi2"
    falcon = m.architecture == "falcon"
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, m.has_swa)
    out_ids = ctx.build_inp_out_ids()
    # every norm of these four is a layer norm (LLM_NORM: ggml_norm), which ggml's allocator never runs in
    # place, unlike an RMS norm (ggml/src/ggml-alloc.c: ggml_op_can_inplace, lines 22-50, read at 632 by
    # ggml_gallocr_allocate_node); the graphs (src/models/): cohere2.cpp lines 76 and 143, command-r.cpp 68,
    # 80, 87 and 129, phi2.cpp 67-70 and 125-128, falcon.cpp 71-84 and 147-150 (llama-cpp-python 0.3.36's
    # vendored llama.cpp). With the logits at the compute peak, an RMS norm planned there moved the peak.
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), w.layer(il, "attn_norm.bias"), rms=False, il=il)
        ffn_inp = cur
        norm_2 = w.layer(il, "attn_norm_2.weight")
        if norm_2 is not None:  # Falcon-40B: attention reads a second norm of the layer's input
            cur = ctx.build_norm(inp_l, norm_2, w.layer(il, "attn_norm_2.bias"), rms=False, il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q_norm, k_norm = w.layer(il, "attn_q_norm.weight"), w.layer(il, "attn_k_norm.weight")
        if q_norm is not None:  # Command R+: per-head layer norms of Q and K before RoPE (command-r.cpp 79-88)
            q = ctx.build_norm(q, q_norm, rms=False, il=il)
        if k_norm is not None:
            k = ctx.build_norm(k, k_norm, rms=False, il=il)
        if layer.is_swa or not m.has_swa:
            freqs = w.rope_freqs(il)
            q = g.rope(q, inp_pos, freqs)
            k = g.rope(k, inp_pos, freqs)
        if phi2:
            q = g.scale(q)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(
            inp, layer, w.layer(il, "attn_output.weight"), w.layer(il, "attn_output.bias"), q, k, v, iswa=m.has_swa
        )
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
            ffn_inp = g.get_rows(ffn_inp, out_ids)
        attn_out = cur
        gate = w.layer(il, "ffn_gate.weight")
        ffn = ctx.build_ffn(
            ffn_inp,
            w.layer(il, "ffn_up.weight"),
            gate,
            w.layer(il, "ffn_down.weight"),
            "silu" if gate is not None else "gelu",
            gate is not None,
            up_b=w.layer(il, "ffn_up.bias"),
            down_b=w.layer(il, "ffn_down.bias"),
        )
        if falcon:  # FFN + attention, then the residual
            inp_l = g.add(g.add(ffn, attn_out), inp_l)
        else:  # phi2: attention + FFN, then the residual; cohere2: FFN + residual, then attention
            inp_l = g.add(g.add(attn_out, ffn), inp_l) if phi2 else g.add(g.add(ffn, inp_l), attn_out)
    if phi2 or falcon:
        final_output(ctx, inp_l, output_bias=True, rms=False)
    else:
        granite_output(ctx, inp_l, logit_scale=bool(m.f_logit_scale), rms=False)


_RULES = {"cohere2": _cohere2, "command-r": _command_r}


def read_hparams(anatomy: ModelAnatomy, meta: Meta) -> None:
    _RULES.get(anatomy.architecture, plain)(anatomy, meta)


build_graph = build_cohere2
