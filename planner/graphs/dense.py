"""Graphs of the dense decoder families (src/models/{llama,qwen2,qwen3,phi3,gemma*}.cpp)."""

from __future__ import annotations

from planner.ggml_graph import Tensor
from planner.graphs.context import GraphContext


def _final(ctx: GraphContext, cur: Tensor, softcap: bool = False, output_bias: bool = False) -> None:
    g, w = ctx.g, ctx.w
    cur = ctx.build_norm(cur, w.get_optional("output_norm.weight"), w.get_optional("output_norm.bias"))
    embd = cur
    cur = ctx.mm(ctx.output_weight(), cur, w.get_optional("output.scale"))
    if output_bias and w.get_optional("output.bias") is not None:  # qwen2, phi2
        cur = g.add(cur, w.get("output.bias"))
    if softcap:
        cur = g.scale(cur)
        cur = g.unary(cur)
        cur = g.scale(cur)
    ctx.set_outputs(embd, cur)


def _attention_inputs(ctx: GraphContext, iswa: bool) -> tuple[Tensor, Tensor]:
    """The KV inputs of full and windowed layers (build_attn_inp_kv_iswa), or one for every layer."""
    if iswa:
        return ctx.build_attn_inp_kv(swa=False), ctx.build_attn_inp_kv(swa=True)
    inp = ctx.build_attn_inp_kv()
    return inp, inp


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
    "ernie4_5-moe": (False, False, True),
    "glm4moe": (False, False, True),
    "minimax-m2": (True, True, True),
    "olmoe": (True, True, False),
}


# the activation of the architectures whose FFN has no gate (arcee's ReLU², starcoder2's GELU)
_NO_GATE_ACTIVATION = {"arcee": "relu_sqr", "starcoder2": "gelu", "gpt2": "gelu", "starcoder": "gelu"}
_LEARNED_POSITIONS = ("gpt2", "starcoder")


def build_llama(ctx: GraphContext) -> None:
    """The llama shape shared by llama (dense or Mixtral-style MoE), mistral3, qwen2/3 and their
    MoE variants, and OLMoE: pre-norm attention, RoPE, SwiGLU or routed experts."""
    g, w, m = ctx.g, ctx.w, ctx.model
    qk_norm, qk_norm_flat, moe_norm_w = _LLAMA_LIKE.get(m.architecture, (False, False, True))
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    learned_positions = m.architecture in _LEARNED_POSITIONS
    if learned_positions:  # gpt2, starcoder: a table of position embeddings instead of RoPE
        inp_l = g.add(inp_l, g.get_rows(w.get("position_embd.weight"), inp_pos))
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), w.layer(il, "attn_norm.bias"), il=il)
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
        freqs = w.get_optional("rope_freqs.weight")
        if qk_norm and not qk_norm_flat:
            q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        if not learned_positions:
            q = g.rope(q, inp_pos, freqs)
        if qk_norm and not qk_norm_flat:
            k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        if not learned_positions:
            k = g.rope(k, inp_pos, freqs)
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
        cur = ctx.build_norm(ffn_inp, ffn_norm, w.layer(il, "ffn_norm.bias"), il=il)
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
                moe = g.add(
                    moe,
                    ctx.build_ffn(
                        cur,
                        w.layer(il, "ffn_up_shexp.weight"),
                        w.layer(il, "ffn_gate_shexp.weight"),
                        w.layer(il, "ffn_down_shexp.weight"),
                        "silu",
                        True,
                    ),
                )
            elif w.layer(il, "ffn_gate_inp_shexp.weight") is not None:
                gate_inp = ctx.mm(w.layer_req(il, "ffn_gate_inp_shexp.weight"), cur)
                gate = g.div(g.unary(gate_inp), gate_inp)
                shared = ctx.build_ffn(
                    cur,
                    w.layer(il, "ffn_up_shexp.weight"),
                    w.layer(il, "ffn_gate_shexp.weight"),
                    w.layer(il, "ffn_down_shexp.weight"),
                    "silu",
                    True,
                )
                moe = g.add(moe, g.mul(shared, gate))
            cur = moe
        inp_l = ctx.deepstack(g.add(cur, ffn_inp), il)
    _final(ctx, inp_l, output_bias=m.architecture == "qwen2")


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
        factors = w.get_optional("rope_factors_long.weight")
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
        cur = ctx.build_ffn(cur, w.layer(il, "ffn_up.weight"), None, w.layer(il, "ffn_down.weight"), "swiglu", False)
        inp_l = g.add(residual, cur)
    _final(ctx, inp_l, output_bias=True)


def build_gemma(ctx: GraphContext) -> None:
    """gemma (v1): scaled embeddings, GELU feed-forward, dense attention."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_l = g.scale(inp_l)
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        q, k, v = ctx.build_qkv(layer, cur, layer.head_dim_k, layer.n_head, layer.head_dim_k, layer.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        q = g.scale(q)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        sa_out = g.add(cur, inp_l)
        cur = ctx.build_norm(sa_out, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_ffn(
            cur,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            w.layer(il, "ffn_down.weight"),
            "gelu",
            True,
        )
        inp_l = g.add(cur, sa_out)
    _final(ctx, inp_l)


def build_gemma2_3(ctx: GraphContext) -> None:
    """gemma2 and gemma3: post-norms, sliding-window layers, optional logit soft-capping."""
    g, w, m = ctx.g, ctx.w, ctx.model
    gemma3 = m.architecture == "gemma3"
    iswa = m.has_swa
    inp_l = ctx.build_inp_embd()
    inp_l = g.scale(inp_l)
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = _attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        q, k, v = ctx.build_qkv(layer, cur, layer.head_dim_k, layer.n_head, layer.head_dim_k, layer.n_head_kv)
        if gemma3:
            q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        q = g.rope(q, inp_pos)
        if gemma3:
            k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        k = g.rope(k, inp_pos)
        q = g.scale(q)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(
            inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=iswa, softcap=m.f_attn_softcap > 0
        )
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        cur = ctx.build_norm(cur, w.layer(il, "post_attention_norm.weight"), il=il)
        sa_out = g.add(cur, inp_l)
        cur = ctx.build_norm(sa_out, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_ffn(
            cur,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            w.layer(il, "ffn_down.weight"),
            "gelu",
            True,
        )
        cur = ctx.build_norm(cur, w.layer(il, "post_ffw_norm.weight"))  # il = -1 in llama.cpp: not pinned
        inp_l = g.add(cur, sa_out)
    _final(ctx, inp_l, softcap=m.f_final_softcap > 0)


def build_olmo2(ctx: GraphContext) -> None:
    """olmo2 (and Olmo 3's sliding-window layers) and exaone4: no pre-norms; Q/K normed (olmo2 over the
    whole projection, exaone4 per head), then RoPE (exaone4 with a window: on the windowed layers only);
    the attention and FFN outputs are normed before each residual (llama_model_olmo2, _exaone4)."""
    g, w, m = ctx.g, ctx.w, ctx.model
    iswa = m.has_swa
    per_head = m.architecture == "exaone4"
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = _attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, inp_l, hd, layer.n_head, hd, layer.n_head_kv, reshape=per_head)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        if not per_head:
            q = g.reshape(q, hd, layer.n_head, ctx.n_tokens)
            k = g.reshape(k, hd, layer.n_head_kv, ctx.n_tokens)
            v = g.reshape(v, hd, layer.n_head_kv, ctx.n_tokens)
        if not (per_head and iswa and not layer.is_swa):
            freqs = w.get_optional("rope_freqs.weight")
            q = g.rope(q, inp_pos, freqs)
            k = g.rope(k, inp_pos, freqs)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=iswa)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        cur = ctx.build_norm(cur, w.layer(il, "post_attention_norm.weight"), il=il)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_ffn(
            ffn_inp,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            w.layer(il, "ffn_down.weight"),
            "silu",
            True,
        )
        cur = ctx.build_norm(cur, w.layer(il, "post_ffw_norm.weight"), il=il)
        inp_l = g.add(cur, ffn_inp)
    _final(ctx, inp_l)


def build_cohere2(ctx: GraphContext) -> None:
    """cohere2 (Command R7B), command-r, phi2 and falcon: one layer norm feeds attention and the FFN side
    by side, both added to the residual. cohere2: RoPE on the windowed layers only, a SwiGLU FFN, scaled logits
    (llama_model_cohere2); phi2: RoPE everywhere, Q scaled, biases, a GELU FFN, an output bias."""
    from planner.graphs.granite import granite_output

    g, w, m = ctx.g, ctx.w, ctx.model
    phi2 = m.architecture == "phi2"
    falcon = m.architecture == "falcon"
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = _attention_inputs(ctx, m.has_swa)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), w.layer(il, "attn_norm.bias"), il=il)
        ffn_inp = cur
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        if layer.is_swa or not m.has_swa:
            freqs = w.get_optional("rope_freqs.weight")
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
        _final(ctx, inp_l, output_bias=True)
    else:
        granite_output(ctx, inp_l, logit_scale=bool(m.f_logit_scale))
