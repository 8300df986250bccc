"""Gemma 3n (src/models/gemma3n-iswa.cpp): AltUp streams, Laurel, per-layer input embeddings,
sparse FFN gates on the first layers and KV caches shared past layer 20.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    load_swa_pattern,
)
from planner.errors import ModelError
from planner.ggml_graph import F32, I32, Tensor
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.hparams import (
    AltUp,
)
from planner.model import SWA_STANDARD, LayerAnatomy

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


# Gemma 3n (llama_model_gemma3n::load_arch_hparams): only the first 20 layers own a KV cache; each later
# layer reads the cache of the last owner of its kind (layer 18's when windowed, layer 19's when global)
GEMMA3N_KV_LAYERS = 20


def gemma3n_kv_source(anatomy: ModelAnatomy, il: int) -> int:
    """The layer whose KV cache layer `il` attends to (itself when it owns one); Gemma 4 shares the same
    way past its own n_layer_kv_from_start."""
    n_kv = anatomy.n_layer_kv_from_start
    if il < n_kv:
        return il
    return n_kv - (2 if anatomy.layers[il].is_swa else 1)


def share_kv_caches(anatomy: ModelAnatomy, meta: Meta, n_kv: int) -> None:
    """Layers from `n_kv` on own no cache; each must reuse one in its own cache (windowed or not)."""
    for layer in anatomy.layers[n_kv:]:
        layer.has_kv = False
        source = anatomy.layers[gemma3n_kv_source(anatomy, layer.index)]
        if source.is_swa != layer.is_swa:
            raise ModelError(
                meta.path,
                f"{anatomy.architecture} layer {layer.index} would reuse layer {source.index}'s KV cache, which "
                "is in the other cache (sliding window or not): llama.cpp aborts",
            )


def _gemma3n_tensor_layers(anatomy: ModelAnatomy) -> None:
    """Where llama.cpp's tensor table puts Gemma 3n's global tensors: the AltUp projections with the
    output layer, the per-layer projection and its norm with layer 0 (LLM_TENSOR_LAYER_REPEATING,
    created as block 0), so that a quantized projection is repacked like any layer matrix."""
    to_output = ("altup_proj.weight", "altup_unembd_proj.weight")
    to_layer0 = ("per_layer_model_proj.weight", "per_layer_proj_norm.weight")
    others = anatomy.other_tensors
    anatomy.output_tensors += [t for t in others if t.name in to_output]
    anatomy.layers[0].tensors += [t for t in others if t.name in to_layer0]
    anatomy.other_tensors = [t for t in others if t.name not in to_output + to_layer0]


def _gemma3n(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Sliding window on four of every five layers (the window is required), KV caches shared past
    layer 20, and the fixed AltUp / Laurel / per-layer-input sizes of llama_hparams."""
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.require_int("attention.sliding_window")
    load_swa_pattern(anatomy, meta, 5)
    if not any(layer.is_swa for layer in anatomy.layers):
        raise ModelError(meta.path, "gemma3n without a sliding-window layer: llama.cpp aborts (is_swa_any)")
    anatomy.n_layer_kv_from_start = GEMMA3N_KV_LAYERS
    share_kv_caches(anatomy, meta, GEMMA3N_KV_LAYERS)
    _gemma3n_tensor_layers(anatomy)
    anatomy.f_final_softcap = 30.0  # always applied (llama_hparams' default, not read from the header)
    anatomy.altup = AltUp()


def altup_slice(ctx: GraphContext, x: Tensor, idx: int) -> Tensor:
    """gemma3n_view_2d_slice: the idx-th [ne0, ne1] plane of a 3-d tensor."""
    return ctx.g.view(x, (x.ne[0], x.ne[1]), (x.nb[1],), idx * x.ne[0] * x.ne[1] * x.type.type_size)


def _rest(ctx: GraphContext, x: Tensor) -> Tensor:
    """The planes after the first: [ne0, ne1, ne2 - 1]."""
    plane = x.ne[0] * x.ne[1] * x.type.type_size
    return ctx.g.view(x, (x.ne[0], x.ne[1], x.ne[2] - 1), (x.nb[1], plane), plane)


def _magnitude(ctx: GraphContext, x: Tensor) -> Tensor:
    g = ctx.g
    return g.sqrt(g.sum_rows(g.sqr(x)))


def _rescaled(ctx: GraphContext, x: Tensor, target: Tensor) -> Tensor:
    """x scaled to the target's magnitude: x * target / |x|."""
    g = ctx.g
    new = _magnitude(ctx, x)
    return g.div(g.mul(x, target), new)


def per_layer_inputs(ctx: GraphContext, inp_l: Tensor, pe: int) -> Tensor:
    """build_inp_per_layer and project_per_layer_inputs (Gemma 3n and 4): [pe, n_tokens, n_layer]."""
    g, w, n_layer, n_tok = ctx.g, ctx.w, ctx.model.n_layer, ctx.n_tokens
    tokens = g.input(I32, (n_tok,), "inp_tokens")
    per_layer = g.get_rows(w.get("per_layer_token_embd.weight"), tokens)
    per_layer = g.scale(g.reshape(per_layer, pe, n_layer, n_tok))
    g.expand(per_layer)
    proj = g.scale(ctx.mm(w.get("per_layer_model_proj.weight"), inp_l))
    proj = g.reshape(proj, pe, n_layer, n_tok)
    proj = ctx.build_norm(proj, w.get("per_layer_proj_norm.weight"))
    per_layer = g.scale(g.add(proj, per_layer))
    return g.cont(g.permute(per_layer, 0, 2, 1, 3))


def _router(ctx: GraphContext, x: Tensor, il: int) -> Tensor:
    """altup_compute_router_modalities: [n_altup, n_tokens]."""
    g, w = ctx.g, ctx.w
    r = g.scale(ctx.build_norm(x, w.layer_req(il, "altup_router_norm.weight"), il=il))
    return g.unary(ctx.mm(w.layer_req(il, "altup_router.weight"), r))


def _predict(ctx: GraphContext, cur: Tensor, il: int) -> Tensor:
    """altup_predict: every AltUp copy predicted from the active one, [n_embd, n_tokens, n_altup]."""
    g = ctx.g
    n = ctx.model.alt_up.n_altup
    modalities = _router(ctx, altup_slice(ctx, cur, ctx.model.alt_up.i_act), il)
    coefs = ctx.mm(ctx.w.layer_req(il, "altup_predict_coef.weight"), modalities)
    coefs = g.reshape(coefs, n, n, ctx.n_tokens)
    permuted = g.cont(g.permute(cur, 1, 2, 0, 3))
    predictions = g.cont(g.permute(g.mul_mat(permuted, coefs), 0, 2, 1, 3))
    return g.add(predictions, cur)


def _correct(ctx: GraphContext, predictions: Tensor, activated: Tensor, il: int) -> Tensor:
    """altup_correct: each copy moved by the active copy's innovation, weighted by the router."""
    g = ctx.g
    n, act = ctx.model.alt_up.n_altup, ctx.model.alt_up.i_act
    modalities = _router(ctx, activated, il)
    innovation = g.sub(activated, altup_slice(ctx, predictions, act))
    coefs = g.scale(ctx.mm(ctx.w.layer_req(il, "altup_correct_coef.weight"), modalities))  # scale_bias: + 1
    coefs = g.cont(g.transpose(coefs), (1, ctx.n_tokens, n))
    innovation = g.repeat(innovation, (ctx.n_embd, ctx.n_tokens, n, 1))
    return g.add(g.mul(innovation, coefs), predictions)


def _laurel(ctx: GraphContext, cur: Tensor, il: int) -> Tensor:
    w = ctx.w
    tmp = ctx.mm(w.layer_req(il, "laurel_r.weight"), ctx.mm(w.layer_req(il, "laurel_l.weight"), cur))
    tmp = ctx.build_norm(tmp, w.layer_req(il, "laurel_post_norm.weight"), il=il)
    return ctx.g.add(tmp, cur)


def _gaussian_topk(ctx: GraphContext, x: Tensor) -> Tensor:
    """Keep the gate values above mean + 1.645 std of each row (ReLU of the difference)."""
    g = ctx.g
    mean = g.op("MEAN", F32, (1, x.ne[1], x.ne[2], x.ne[3]), [x])
    std = g.sqrt(g.scale(g.sum_rows(g.sqr(g.sub(x, mean)))))
    cutoff = g.add(mean, g.scale(std))
    return g.unary(g.sub(x, cutoff))


def _attention(
    ctx: GraphContext, inp: dict[str, Tensor | None], layer: LayerAnatomy, cur: Tensor, pos: Tensor
) -> Tensor:
    """Q/K/V of a layer that owns its cache, else Q alone against the cache it reuses."""
    g, w, il = ctx.g, ctx.w, layer.index
    hd = layer.head_dim_k
    q_norm = w.layer_req(il, "attn_q_norm.weight")
    wo = w.layer_req(il, "attn_output.weight")
    if layer.has_kv:
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = ctx.build_norm(q, q_norm, il=il)
        k = ctx.build_norm(k, w.layer_req(il, "attn_k_norm.weight"), il=il)
        v = g.rms_norm(v)
        q = g.rope(q, pos)
        k = g.rope(k, pos)
        return ctx.build_attn(inp, layer, wo, None, q, k, v, iswa=True)
    wqkv = w.layer(il, "attn_qkv.weight")
    if wqkv is not None:
        qkv = ctx.mm(wqkv, cur)
        q = g.cont(g.view(qkv, (hd * layer.n_head, ctx.n_tokens), (qkv.nb[1],), 0))
    else:
        q = ctx.mm(w.layer_req(il, "attn_q.weight"), cur)
    q = g.reshape(q, hd, layer.n_head, ctx.n_tokens)
    q = g.rope(ctx.build_norm(q, q_norm, il=il), pos)
    return attend_shared(ctx, inp, layer, wo, q)


def attend_shared(
    ctx: GraphContext, inp: dict[str, Tensor | None], layer: LayerAnatomy, wo: Tensor, q: Tensor
) -> Tensor:
    """build_attn without K and V: nothing is stored, the source layer's cache is read."""
    g, s = ctx.g, ctx.shape
    k_rot, v_rot = inp["k_rot"], inp["v_rot"]
    if k_rot is not None:
        q = ctx.hadamard(q, k_rot)
    g.expand(q)
    source = gemma3n_kv_source(ctx.model, layer.index)
    k_cache, v_cache = ctx.kv_cache_tensors(ctx.model.layers[source], layer.is_swa)
    assert v_cache is not None
    n_kv = s.n_kv_swa if layer.is_swa else s.n_kv
    kv = ctx.get_k(k_cache, layer, n_kv)
    vv = ctx.get_v(v_cache, layer, n_kv)
    cur = ctx.build_attn_mha(q, kv, vv, None, inp["mask"], None)
    if v_rot is not None:
        cur = ctx.hadamard(cur, v_rot)
    return ctx.mm(wo, cur, ctx.w.layer(layer.index, "attn_output.scale"))


def _ffn(ctx: GraphContext, cur: Tensor, il: int) -> Tensor:
    g, w = ctx.g, ctx.w
    up = ctx.mm(w.layer_req(il, "ffn_up.weight"), cur)
    gate = ctx.mm(w.layer_req(il, "ffn_gate.weight"), cur)
    if il < ctx.model.alt_up.n_layer_sparsity:
        gate = _gaussian_topk(ctx, gate)
    cur = g.mul(up, g.unary(gate))
    return ctx.mm(w.layer_req(il, "ffn_down.weight"), cur)


def _per_layer_gate(ctx: GraphContext, corrected: Tensor, inp_per_layer: Tensor, il: int) -> Tensor:
    """The corrected active copy, gated down to n_embd_altup, times this layer's input, projected back."""
    g, w = ctx.g, ctx.w
    first = altup_slice(ctx, corrected, ctx.model.alt_up.i_act)
    first = g.mul(first, w.layer_req(il, "altup_correct_scale.weight"))
    first = g.unary(ctx.mm(w.layer_req(il, "inp_gate.weight"), first))
    first = g.mul(first, altup_slice(ctx, inp_per_layer, il))
    first = ctx.mm(w.layer_req(il, "proj.weight"), first)
    return ctx.build_norm(first, w.layer_req(il, "post_norm.weight"), il=il)


def _layer(
    ctx: GraphContext,
    inp: dict[str, Tensor | None],
    layer: LayerAnatomy,
    inp_l: Tensor,
    inp_per_layer: Tensor,
    pos: Tensor,
) -> Tensor:
    g, w, il = ctx.g, ctx.w, layer.index
    predictions = _predict(ctx, inp_l, il)
    active = altup_slice(ctx, predictions, ctx.model.alt_up.i_act)
    cur = ctx.build_norm(active, w.layer_req(il, "attn_norm.weight"), il=il)
    laurel_out = _laurel(ctx, cur, il)
    cur = _attention(ctx, inp, layer, cur, pos)
    cur = ctx.build_norm(cur, w.layer_req(il, "post_attention_norm.weight"), il=il)
    cur = g.add(cur, active)
    attn_laurel = g.scale(g.add(cur, laurel_out))
    cur = ctx.build_norm(attn_laurel, w.layer_req(il, "ffn_norm.weight"), il=il)
    cur = _ffn(ctx, cur, il)
    cur = ctx.build_norm(cur, w.layer_req(il, "post_ffw_norm.weight"))  # il = -1 in llama.cpp: not pinned
    gated = g.add(cur, attn_laurel)
    corrected = _correct(ctx, predictions, gated, il)
    first = _per_layer_gate(ctx, corrected, inp_per_layer, il)
    head = altup_slice(ctx, corrected, 0)
    tail = g.add(_rest(ctx, corrected), first)
    return g.concat(head, tail, 2)


def _unembed(ctx: GraphContext, cur: Tensor) -> Tensor:
    """The AltUp copies merged back into one hidden state (their mean after unembedding)."""
    g = ctx.g
    target = _magnitude(ctx, altup_slice(ctx, cur, ctx.model.alt_up.i_act))
    unembd = g.mul_mat(ctx.w.get("altup_unembd_proj.weight"), _rest(ctx, cur))
    unembd = _rescaled(ctx, unembd, target)
    out = altup_slice(ctx, cur, 0)
    for i in range(ctx.model.alt_up.n_altup - 1):
        out = g.add(out, altup_slice(ctx, unembd, i))
    return g.scale(out)


def build_gemma3n(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    n_altup = m.alt_up.n_altup
    inp_l = g.scale(ctx.build_inp_embd())
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    inp_per_layer = per_layer_inputs(ctx, inp_l, ctx.model.alt_up.n_embd_altup)
    # the other AltUp copies: projections of the embeddings, at the embeddings' magnitude
    target = _magnitude(ctx, inp_l)
    repeated = g.repeat(inp_l, (ctx.n_embd, ctx.n_tokens, n_altup - 1, 1))
    added = _rescaled(ctx, g.mul_mat(w.get("altup_proj.weight"), repeated), target)
    cur = g.concat(inp_l, added, 2)
    for layer in m.trunk_layers:
        inp = inp_swa if layer.is_swa else inp_full
        cur = _layer(ctx, inp, layer, cur, inp_per_layer, inp_pos)
    cur = _unembed(ctx, cur)
    cur = g.get_rows(cur, ctx.build_inp_out_ids())
    final_output(ctx, cur, softcap=True)


read_hparams = _gemma3n
build_graph = build_gemma3n
