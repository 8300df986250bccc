"""Llama and the architectures llama.cpp builds in its shape (src/models/llama.cpp, qwen2.cpp,
qwen3.cpp, qwen2moe.cpp, qwen3moe.cpp, olmoe.cpp and the look-alikes): pre-norm attention, RoPE,
SwiGLU (or a gateless FFN) or routed experts. Matched byte for byte on tiny models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_experts,
)
from planner.ggml_graph import F32
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


# per architecture: (q/k norm, q/k norm over the whole projection before the reshape, MoE norm_w)
_LLAMA_LIKE = {
    "llama": (False, False, True),
    "mistral3": (False, False, True),
    "qwen2": (False, False, True),
    "qwen3": (True, False, True),
    "qwen2moe": (False, False, False),
    "qwen3moe": (True, False, True),
    "qwen3vl": (True, False, True),
    "qwen3vlmoe": (True, False, True),
    "qwen3tts": (True, False, True),
    "ernie4_5-moe": (False, False, True),
    "glm4moe": (False, False, True),
    "minimax-m2": (True, True, True),
    "olmoe": (True, True, False),
}


# the activation of the architectures whose FFN has no gate (arcee's ReLU², starcoder2's GELU)
_NO_GATE_ACTIVATION = {"arcee": "relu_sqr", "starcoder2": "gelu", "gpt2": "gelu", "starcoder": "gelu"}


_LEARNED_POSITIONS = ("gpt2", "starcoder")

# layer norms (LLM_NORM: ggml_norm), which ggml's allocator never runs in place, where llama has RMS norms
# (src/models/orion.cpp lines 67, 106, 129; starcoder2.cpp 83, 123, 146; gpt2.cpp 86, 113, 137; starcoder.cpp
# 87, 112, 134; ggml_op_can_inplace in ggml/src/ggml-alloc.c lists RMS_NORM, not NORM)
_LAYER_NORM = frozenset(("orion", "starcoder2", "gpt2", "starcoder"))


def build_llama(ctx: GraphContext) -> None:
    """The llama shape shared by llama (dense or Mixtral-style MoE), mistral3, qwen2/3 and their
    MoE variants, and OLMoE: pre-norm attention, RoPE, SwiGLU or routed experts."""
    g, w, m = ctx.g, ctx.w, ctx.model
    qk_norm, qk_norm_flat, moe_norm_w = _LLAMA_LIKE.get(m.architecture, (False, False, True))
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    attn_scale = g.input(F32, (1, 1, ctx.n_tokens), "inp_attn_scale") if m.f_attn_temp_scale else None
    inp_attn = ctx.build_attn_inp_kv()
    learned_positions = m.architecture in _LEARNED_POSITIONS
    rms = m.architecture not in _LAYER_NORM
    if learned_positions:  # gpt2, starcoder: a table of position embeddings instead of RoPE
        inp_l = g.add(inp_l, g.get_rows(w.get("position_embd.weight"), inp_pos))
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), w.layer(il, "attn_norm.bias"), rms=rms, il=il)
        hd = layer.head_dim_k
        if qk_norm_flat:
            q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv, reshape=False)
            q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
            k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
            q = g.reshape(q, hd, layer.n_head, ctx.n_tokens)
            k = g.reshape(k, hd, layer.n_head_kv, ctx.n_tokens)
            v = g.reshape(v, hd, layer.n_head_kv, ctx.n_tokens)
        else:
            q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        freqs = w.rope_freqs(il)
        if qk_norm and not qk_norm_flat:
            q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        # smollm3 leaves every n_no_rope_layer_step-th layer without RoPE (its Q, K and V then stay views
        # of a fused QKV projection, which changes the graph's buffers)
        use_rope = not learned_positions and not (m.n_no_rope_layer_step and (il + 1) % m.n_no_rope_layer_step == 0)
        if use_rope:
            q = g.rope(q, inp_pos, freqs)
        if qk_norm and not qk_norm_flat:
            k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        if use_rope:
            k = g.rope(k, inp_pos, freqs)
        if attn_scale is not None:
            q = g.mul(q, attn_scale)
        cur = ctx.build_attn(
            inp_attn, layer, w.layer(il, "attn_output.weight"), w.layer(il, "attn_output.bias"), q, k, v
        )
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        # seed_oss and glm4moe name the FFN's pre-norm post_attention_norm
        ffn_norm = w.layer(il, "ffn_norm.weight")
        if ffn_norm is None:
            ffn_norm = w.layer(il, "post_attention_norm.weight")
        cur = ctx.build_norm(ffn_inp, ffn_norm, w.layer(il, "ffn_norm.bias"), rms=rms, il=il)
        if w.layer(il, "ffn_gate_inp.weight") is None:
            gate = w.layer(il, "ffn_gate.weight")
            cur = ctx.build_ffn(
                cur,
                w.layer(il, "ffn_up.weight"),
                gate,
                w.layer(il, "ffn_down.weight"),
                "silu" if gate is not None else _NO_GATE_ACTIVATION.get(m.architecture, "relu_sqr"),
                gate is not None,
                up_b=w.layer(il, "ffn_up.bias"),
                gate_b=w.layer(il, "ffn_gate.bias"),
                down_b=w.layer(il, "ffn_down.bias"),
            )
        else:
            moe = ctx.build_moe_ffn(
                cur,
                il,
                m.moe.n_expert,
                m.moe.n_used,
                "silu",
                moe_norm_w,
                m.moe.weights_scale,
                m.moe.gating,
                exp_probs_b=w.layer(il, "exp_probs_b.bias"),
            )
            if w.layer(il, "ffn_gate_inp_shexp.weight") is None and w.layer(il, "ffn_up_shexp.weight") is not None:
                # ernie4_5-moe: the shared expert added as it is, no gate of its own
                moe = g.add(moe, ctx.build_shared_expert(cur, il))
            elif w.layer(il, "ffn_gate_inp_shexp.weight") is not None:
                gate_inp = ctx.mm(w.layer_req(il, "ffn_gate_inp_shexp.weight"), cur)
                gate = g.div(g.unary(gate_inp), gate_inp)
                shared = ctx.build_shared_expert(cur, il)
                moe = g.add(moe, g.mul(shared, gate))
            cur = moe
        inp_l = ctx.deepstack(g.add(cur, ffn_inp), il)
    final_output(ctx, inp_l, output_bias=m.architecture == "qwen2", rms=rms)


def build_stablelm(ctx: GraphContext) -> None:
    """llama_model_stablelm::graph: layer norms with biases, per-head Q/K layer norms where present
    (StableLM 2 12B), and without an FFN norm a parallel residual: the FFN reads the attention's input."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), w.layer(il, "attn_norm.bias"), rms=False, il=il)
        inp_sa = cur
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q_norm, k_norm = w.layer(il, "attn_q_norm.weight"), w.layer(il, "attn_k_norm.weight")
        if q_norm is not None:
            q = ctx.build_norm(q, q_norm, rms=False, il=il)
        if k_norm is not None:
            k = ctx.build_norm(k, k_norm, rms=False, il=il)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_l)
        ffn_norm = w.layer(il, "ffn_norm.weight")
        if ffn_norm is not None:
            cur = ctx.build_norm(ffn_inp, ffn_norm, w.layer(il, "ffn_norm.bias"), rms=False, il=il)
        else:  # parallel residual
            cur = inp_sa
        cur = ctx.build_layer_ffn(cur, il)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l, rms=False)


def build_graph(ctx: GraphContext) -> None:
    (build_stablelm if ctx.model.architecture == "stablelm" else build_llama)(ctx)


def read_hparams(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Dense attention on every layer, no sliding window; experts read when present."""
    read_experts(anatomy, meta)
    if anatomy.architecture == "smollm3":  # llama.cpp's fixed step: every 4th layer without RoPE
        anatomy.n_no_rope_layer_step = 4
    if anatomy.architecture == "mistral3":  # Ministral 3 scales its queries by position (llama 4 scaling)
        anatomy.f_attn_temp_scale = meta.float_or("attention.temperature_scale", 0.0)
