"""Granite Switch (src/models/granite-switch.cpp): Granite's layers with per-token LoRA adapters. An
adapter's activation token in the prompt switches its LoRA deltas on for the tokens after it: a
one-head attention over a router layer llama.cpp adds past the last layer (its own KV cache cells, one
head wide, no RoPE) reads each token's adapter slot, and every projection adds B[slot] x A[slot] x its
input (two MUL_MAT_IDs) to the base matmul. The tokens are embedded after substitution (no
inp_tokens/inp_embd inputs), the logits divided by the logit scale.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.archs.granite import granite_scales
from planner.errors import GGUFError
from planner.ggml_graph import F32, I32, Tensor
from planner.graphs.context import GraphContext
from planner.model import LayerAnatomy

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_granite_switch(anatomy: ModelAnatomy, meta: Meta) -> None:
    """llama_model_granite_switch::load_arch_hparams: Granite's scales (the logit scale required), the
    adapters' count, LoRA rank and token arrays required; the router layer appended as llama.cpp does
    (n_layer_nextn repurposed: it is not run as a layer, but its one-head KV cache is allocated)."""
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "logit_scale", "adapters.count", "adapters.lora_rank")
    n_adapters = meta.int_or("adapters.count", 0)
    for key in ("adapters.token_ids_activate", "adapters.token_ids_substitute"):
        ids = meta.get(key)
        if not isinstance(ids, list) or len(ids) != n_adapters:
            raise GGUFError(
                anatomy.path, f"graniteswitch: {key} does not match the adapter count (llama.cpp refuses it)"
            )
    granite_scales(anatomy, meta)
    anatomy.use_rope = bool(meta.get("rope.scaling.finetuned", True))
    last = anatomy.layers[-1]
    router = LayerAnatomy(
        index=anatomy.n_layer, n_head=1, n_head_kv=1, head_dim_k=last.head_dim_k, head_dim_v=last.head_dim_v
    )
    router.is_mtp = True  # not a trunk layer: the graph reads its cache once, before the layers
    anatomy.layers.append(router)
    anatomy.n_layer += 1
    anatomy.notes.append("Granite Switch: a one-head router layer past the last one holds each token's adapter slot")


def _delta(ctx: GraphContext, il: int, name: str, cur: Tensor, ids: Tensor) -> Tensor:
    """build_switched_lora_delta: B[slot] x (A[slot] x cur) for each token's adapter slot."""
    g, w, n_tok = ctx.g, ctx.w, cur.ne[1]
    x = g.reshape(cur, cur.ne[0], 1, n_tok)
    ids2 = g.reshape(ids, 1, n_tok)
    a = g.mul_mat_id(w.layer_req(il, f"{name}.lora_a"), x, ids2)
    d = g.mul_mat_id(w.layer_req(il, f"{name}.lora_b"), a, ids2)
    return g.reshape(d, d.ne[0], n_tok)


def _switched_mm(ctx: GraphContext, il: int, name: str, cur: Tensor, ids: Tensor) -> Tensor:
    base = ctx.g.mul_mat(ctx.w.layer_req(il, f"{name}.weight"), cur)
    return ctx.g.add(base, _delta(ctx, il, name, cur, ids))


def _attention(
    ctx: GraphContext,
    layer: LayerAnatomy,
    cur: Tensor,
    inp_pos: Tensor | None,
    ids: Tensor,
    inp: dict[str, Tensor | None],
) -> Tensor:
    g, w, il, n_tok = ctx.g, ctx.w, layer.index, ctx.n_tokens
    hd, n_head, n_kv = layer.head_dim_k, layer.n_head, layer.n_head_kv
    n_q, n_k = hd * n_head, hd * n_kv
    qkv = g.mul_mat(w.layer_req(il, "attn_qkv.weight"), cur)
    es = qkv.type.type_size
    q = g.cont(g.view(qkv, (n_q, n_tok), (qkv.nb[1],), 0))
    k = g.cont(g.view(qkv, (n_k, n_tok), (qkv.nb[1],), n_q * es))
    v = g.cont(g.view(qkv, (n_k, n_tok), (qkv.nb[1],), (n_q + n_k) * es))
    q = g.add(q, _delta(ctx, il, "attn_q", cur, ids))
    k = g.add(k, _delta(ctx, il, "attn_k", cur, ids))
    v = g.add(v, _delta(ctx, il, "attn_v", cur, ids))
    q, k, v = g.reshape(q, hd, n_head, n_tok), g.reshape(k, hd, n_kv, n_tok), g.reshape(v, hd, n_kv, n_tok)
    if inp_pos is not None:
        freqs = w.rope_freqs(il)
        q = g.rope(q, inp_pos, freqs)
        k = g.rope(k, inp_pos, freqs)
    attn = ctx.build_attn(inp, layer, None, None, q, k, v)
    return _switched_mm(ctx, il, "attn_output", attn, ids)


def _ffn(ctx: GraphContext, il: int, cur: Tensor, inp_sa: Tensor, ids: Tensor) -> Tensor:
    g, w, scales = ctx.g, ctx.w, ctx.model.granite_scales
    if scales.residual:
        cur = g.scale(cur)
    ffn_inp = g.add(cur, inp_sa)
    cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
    gate = _switched_mm(ctx, il, "ffn_gate", cur, ids)
    up = _switched_mm(ctx, il, "ffn_up", cur, ids)
    cur = _switched_mm(ctx, il, "ffn_down", g.mul(g.unary(gate), up), ids)
    if scales.residual:
        cur = g.scale(cur)
    return g.add(cur, ffn_inp)


def build_granite_switch(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    n_tok = ctx.n_tokens
    sub_tokens = g.input(I32, (n_tok,), "sub_tokens")
    signals = [g.input(F32, (n_tok,), name) for name in ("router_ksig", "router_vval", "router_q")]
    inp_l = g.get_rows(w.get("token_embd.weight"), sub_tokens)
    if m.granite_scales.embedding:
        inp_l = g.scale(inp_l)
    inp_pos = ctx.build_inp_pos() if m.use_rope else None
    inp_attn = ctx.build_attn_inp_kv()
    router = m.layers[-1]
    k_r, v_r, q_r = (g.pad(g.reshape(s, 1, 1, n_tok), router.head_dim_k - 1) for s in signals)
    routed = ctx.build_attn(inp_attn, router, None, None, q_r, k_r, v_r)
    slot = g.reshape(g.cont(g.view(routed, (1, n_tok), (routed.nb[1],), 0)), n_tok)
    ids = g.cast(g.unary(g.clamp(slot)), I32)  # clamp, round, to I32: each token's adapter slot
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        cur = _attention(ctx, layer, cur, inp_pos, ids, inp_attn)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
            ids = g.reshape(g.get_rows(g.reshape(ids, 1, ids.ne[0]), out_ids), out_ids.ne[0])
        inp_l = _ffn(ctx, il, cur, inp_sa, ids)
    cur = ctx.build_norm(inp_l, w.get("output_norm.weight"))
    ctx.set_outputs(cur, g.scale(ctx.mm(ctx.output_weight(), cur)))


read_hparams = read_granite_switch
build_graph = build_granite_switch
