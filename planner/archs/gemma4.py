"""Gemma 4, text model (src/models/gemma4-iswa.cpp): per-layer windowed/global heads of their own
sizes, Gemma 3n's shared KV caches and per-layer embeddings, experts beside a dense FFN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_experts,
)
from planner.archs.gemma3n import altup_slice, attend_shared, per_layer_inputs, share_kv_caches
from planner.errors import GGUFError, ModelError
from planner.ggml_graph import FLAG_OUTPUT, Tensor
from planner.graphs.blocks import attention_inputs
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD, LayerAnatomy

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _gemma4_swa_pattern(anatomy: ModelAnatomy, meta: Meta) -> None:
    """The per-layer sliding-window array is required (llama_model_gemma4::load_arch_hparams); layers past
    its end are global."""
    value = meta.get("attention.sliding_window_pattern")
    if not isinstance(value, list) or len(value) > 512:
        raise GGUFError(meta.path, f"{meta.arch}.attention.sliding_window_pattern is not a per-layer array")
    for layer in anatomy.layers:
        layer.is_swa = layer.index < len(value) and bool(value[layer.index])


def _gemma4(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Gemma 4: windowed layers from a per-layer array (their own head size), the last
    shared_kv_layers layers reading an earlier layer's cache as in Gemma 3n, optional per-layer
    embeddings and experts beside a dense FFN."""
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.require_int("attention.sliding_window")
    _gemma4_swa_pattern(anatomy, meta)
    for key in ("embedding_length_per_layer_input", "attention.key_length_swa", "attention.value_length_swa"):
        meta.require_int(key)
    if meta.int_or("attention.key_length_swa", 0) != meta.int_or("attention.value_length_swa", 0):
        raise ModelError(meta.path, "Gemma 4 requires n_embd_head_k_swa == n_embd_head_v_swa")
    layer0 = anatomy.layers[0]
    if layer0.head_dim_k != layer0.head_dim_v:
        raise ModelError(meta.path, "Gemma 4 requires n_embd_head_k == n_embd_head_v")
    if not any(layer.is_swa for layer in anatomy.layers):
        raise ModelError(meta.path, "gemma4 without a sliding-window layer: llama.cpp aborts (is_swa_any)")
    n_kv = anatomy.n_layer - meta.int_or("attention.shared_kv_layers", 0)
    if n_kv < 2:  # GGML_ASSERT(n_layer_kv_from_start >= 2) in the cache's layer-reuse callback
        raise ModelError(meta.path, "gemma4 with fewer than 2 layers owning a KV cache: llama.cpp aborts")
    anatomy.n_layer_kv_from_start = n_kv
    share_kv_caches(anatomy, meta, n_kv)
    anatomy.n_embd_per_layer = meta.int_or("embedding_length_per_layer_input", 0)
    to_layer0 = ("per_layer_model_proj.weight", "per_layer_proj_norm.weight")
    anatomy.layers[0].tensors += [t for t in anatomy.other_tensors if t.name in to_layer0]
    anatomy.other_tensors = [t for t in anatomy.other_tensors if t.name not in to_layer0]
    anatomy.f_final_softcap = meta.float_or("final_logit_softcapping", 0.0)
    # rope_freqs (proportional RoPE) is created for the full-attention layers only
    anatomy.rope_freqs_layers = tuple(layer.index for layer in anatomy.layers if not layer.is_swa)
    read_experts(anatomy, meta)


def _query(
    ctx: GraphContext, layer: LayerAnatomy, cur: Tensor, qkv: Tensor | None, pos: Tensor, freqs: Tensor | None
) -> Tensor:
    """Q from the fused projection (a contiguous copy of its first rows) or attn_q, normed and rotated."""
    g, w, il = ctx.g, ctx.w, layer.index
    hd = layer.head_dim_k
    if qkv is not None:
        q = g.cont(g.view(qkv, (hd * layer.n_head, ctx.n_tokens), (qkv.nb[1],), 0))
    else:
        q = ctx.mm(w.layer_req(il, "attn_q.weight"), cur, w.layer(il, "attn_q.scale"))
    q = g.reshape(q, hd, layer.n_head, ctx.n_tokens)
    q = ctx.build_norm(q, w.layer_req(il, "attn_q_norm.weight"), il=il)
    return g.rope(q, pos, freqs)


def _key_value(
    ctx: GraphContext, layer: LayerAnatomy, cur: Tensor, qkv: Tensor | None, pos: Tensor, freqs: Tensor | None
) -> tuple[Tensor, Tensor]:
    """K and V of a layer that owns its cache; without attn_v, V is K's projection."""
    g, w, il = ctx.g, ctx.w, layer.index
    hd, n_tok = layer.head_dim_k, ctx.n_tokens
    if qkv is not None:
        q_dim, k_dim, es = hd * layer.n_head, hd * layer.n_head_kv, qkv.type.type_size
        k = g.cont(g.view(qkv, (k_dim, n_tok), (qkv.nb[1],), q_dim * es))
        v = g.cont(g.view(qkv, (k_dim, n_tok), (qkv.nb[1],), (q_dim + k_dim) * es))
    else:
        k = ctx.mm(w.layer_req(il, "attn_k.weight"), cur, w.layer(il, "attn_k.scale"))
        wv = w.layer(il, "attn_v.weight")
        v = ctx.mm(wv, cur, w.layer(il, "attn_v.scale")) if wv is not None else k
    k = g.reshape(k, hd, layer.n_head_kv, n_tok)
    v = g.reshape(v, hd, layer.n_head_kv, n_tok)
    k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
    v = g.rms_norm(v)
    k = g.rope(k, pos, freqs)
    return k, v


def _attention(
    ctx: GraphContext, inp: dict[str, Tensor | None], layer: LayerAnatomy, cur: Tensor, pos: Tensor
) -> Tensor:
    w, il = ctx.w, layer.index
    freqs = None if layer.is_swa else w.rope_freqs(il)
    wqkv = w.layer(il, "attn_qkv.weight")
    qkv = ctx.mm(wqkv, cur, w.layer(il, "attn_qkv.scale")) if wqkv is not None else None
    q = _query(ctx, layer, cur, qkv, pos, freqs)
    wo = w.layer_req(il, "attn_output.weight")
    if not layer.has_kv:
        return attend_shared(ctx, inp, layer, wo, q)
    k, v = _key_value(ctx, layer, cur, qkv, pos, freqs)
    return ctx.build_attn(inp, layer, wo, None, q, k, v, iswa=True)


def _moe(ctx: GraphContext, attn_out: Tensor, il: int) -> Tensor:
    """The shared dense FFN beside the routed experts, each with its own norms, summed."""
    g, w, m = ctx.g, ctx.w, ctx.model
    mlp = ctx.build_norm(attn_out, w.layer_req(il, "ffn_norm.weight"), il=il)
    mlp = _dense_ffn(ctx, mlp, il)
    mlp = ctx.build_norm(mlp, w.layer_req(il, "post_ffw_norm_1.weight"), il=il)
    moe = ctx.build_norm(attn_out, w.layer_req(il, "pre_ffw_norm_2.weight"), il=il)
    tmp = g.mul(g.scale(g.rms_norm(attn_out)), w.layer_req(il, "ffn_gate_inp.scale"))
    logits = ctx.mm(w.layer_req(il, "ffn_gate_inp.weight"), tmp)
    moe = ctx.build_moe_ffn(moe, il, m.moe.n_expert, m.moe.n_used, "gelu", True, logits=logits)
    moe = ctx.build_norm(moe, w.layer_req(il, "post_ffw_norm_2.weight"), il=il)
    return g.add(mlp, moe)


def _dense_ffn(ctx: GraphContext, cur: Tensor, il: int) -> Tensor:
    w = ctx.w
    return ctx.build_ffn(
        cur, w.layer(il, "ffn_up.weight"), w.layer(il, "ffn_gate.weight"), w.layer(il, "ffn_down.weight"), "gelu"
    )


def _per_layer_embedding(ctx: GraphContext, cur: Tensor, inp_per_layer: Tensor, il: int) -> Tensor:
    """The layer's output gated down to n_embd_per_layer, times its per-layer input, projected back."""
    g, w = ctx.g, ctx.w
    pe_in = cur
    cur = g.unary(ctx.mm(w.layer_req(il, "inp_gate.weight"), cur))
    cur = g.mul(cur, altup_slice(ctx, inp_per_layer, il))
    cur = ctx.mm(w.layer_req(il, "proj.weight"), cur)
    cur = ctx.build_norm(cur, w.layer_req(il, "post_norm.weight"), il=il)
    return g.add(pe_in, cur)


def _layer(
    ctx: GraphContext,
    inp: dict[str, Tensor | None],
    layer: LayerAnatomy,
    inp_l: Tensor,
    inp_per_layer: Tensor | None,
    pos: Tensor,
) -> Tensor:
    g, w, il = ctx.g, ctx.w, layer.index
    cur = ctx.build_norm(inp_l, w.layer_req(il, "attn_norm.weight"), il=il)
    cur = _attention(ctx, inp, layer, cur, pos)
    cur = ctx.build_norm(cur, w.layer_req(il, "post_attention_norm.weight"), il=il)
    attn_out = g.add(cur, inp_l)
    if w.layer(il, "ffn_gate_inp.weight") is not None:
        cur = _moe(ctx, attn_out, il)
    else:
        cur = ctx.build_norm(attn_out, w.layer_req(il, "ffn_norm.weight"), il=il)
        cur = _dense_ffn(ctx, cur, il)
    cur = ctx.build_norm(cur, w.layer_req(il, "post_ffw_norm.weight"))  # il = -1 in llama.cpp: not pinned
    cur = g.add(cur, attn_out)
    if inp_per_layer is not None:
        cur = _per_layer_embedding(ctx, cur, inp_per_layer, il)
    scale = w.layer(il, "layer_output_scale.weight")
    if scale is not None:
        cur = g.mul(cur, scale)
    return cur


def build_gemma4(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = g.scale(ctx.build_inp_embd())
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    out_ids = ctx.build_inp_out_ids()
    inp_per_layer = None
    pe = m.n_embd_per_layer
    if pe > 0:
        inp_per_layer = per_layer_inputs(ctx, inp_l, pe)
    cur = inp_l
    for layer in m.trunk_layers:
        cur = _layer(ctx, inp_swa if layer.is_swa else inp_full, layer, cur, inp_per_layer, inp_pos)
    cur = ctx.build_norm(cur, w.get("output_norm.weight"))
    cur.flags |= FLAG_OUTPUT  # t_h_nextn: the post-norm hidden state is an output of the graph
    embd = g.get_rows(cur, out_ids)
    logits = ctx.mm(ctx.output_weight(), embd, w.get_optional("output.scale"))
    if m.f_final_softcap > 0:
        logits = g.scale(g.unary(g.scale(logits)))
    ctx.set_outputs(embd, logits)


read_hparams = _gemma4
build_graph = build_gemma4
