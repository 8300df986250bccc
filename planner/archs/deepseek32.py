"""DeepSeek V3.2 (src/models/deepseek32.cpp): DeepSeek V3 with sparse attention (DSA): a lightning
indexer scores every cached token and keeps the top k for the latent attention. GLM DSA (GLM 5,
src/models/glm-dsa.cpp) builds the same graph, with indexers on some layers only: the others reuse the
top k of the last layer whose indexer ran, and keep no indexer keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    require,
)
from planner.archs.deepseek2 import absorbed_qkv, finish_layer, finish_model, kv_latent, read_deepseek2
from planner.errors import ModelError
from planner.ggml_graph import F16, F32, I64, Tensor, row_size
from planner.ggml_types import GGMLType
from planner.graphs.context import GraphContext
from planner.hparams import (
    SparseIndexer,
)
from planner.model import LayerAnatomy

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _hadamard_size(head: int) -> int:
    """The rotation llama.cpp builds for a K head (llama_kv_cache::build_input_k_rot): the largest
    64 * 2^j dividing it, 64 when 64 does not divide it."""
    n = 64
    while head % (n * 2) == 0:
        n *= 2
    return n


# llama.cpp's GLM 5.2 indexer layers (glm-dsa.cpp, GLM_5_2_DEFAULT_INDEXER_TYPES): the first two,
# then every fourth from the third
def _glm52_full(il: int) -> bool:
    return il < 2 or (il - 2) % 4 == 0


def _glm_dsa(anatomy: ModelAnatomy, meta: Meta) -> None:
    """llama_model_glm_dsa::load_arch_hparams: deepseek32's keys with sigmoid routing by default; GLM 5
    and 5.1 (trained context under 1M) run every indexer, GLM 5.2 its own pattern, the header's
    attention.indexer.types (1: runs, 0: shared) wins."""
    require(anatomy, meta, "expert_feed_forward_length", "expert_shared_count", "attention.layer_norm_rms_epsilon")
    require(anatomy, meta, "attention.q_lora_rank", "attention.kv_lora_rank")
    require(anatomy, meta, "attention.indexer.head_count", "attention.indexer.key_length", "attention.indexer.top_k")
    read_deepseek2(anatomy, meta)
    if not anatomy.latent_cache:
        raise ModelError(anatomy.path, "GLM_DSA architecture requires MLA (key_length_mla and value_length_mla)")
    if anatomy.experts is not None:
        anatomy.experts.gating_func = meta.int_or("expert_gating_func", 0) or 2  # none: sigmoid
    n_trunk = anatomy.n_trunk
    types = meta.get("attention.indexer.types")
    if isinstance(types, list) and len(types) >= n_trunk:
        full = [bool(t) for t in types[:n_trunk]]
    elif isinstance(types, int) and not isinstance(types, bool):
        full = [bool(types)] * n_trunk
    elif anatomy.n_ctx_train < 1048576:
        full = [True] * n_trunk
    else:
        full = [_glm52_full(il) for il in range(n_trunk)]
    if full and not full[0]:
        raise ModelError(
            anatomy.path, "a shared indexer layer before any full one: llama.cpp aborts building its graph"
        )
    _read_indexer(anatomy, meta, tuple(full))


def _read_indexer(anatomy: ModelAnatomy, meta: Meta, full: tuple[bool, ...] = ()) -> None:
    n_head = meta.int_or("attention.indexer.head_count", 0)
    head = meta.int_or("attention.indexer.key_length", 0)
    if not (0 < n_head <= 1 << 16 and 0 < head <= 1 << 16):
        raise ModelError(anatomy.path, f"indexer sizes {n_head} x {head} are out of range")
    top_k = meta.int_or("attention.indexer.top_k", 0)
    anatomy.indexer = SparseIndexer(n_head=n_head, head_size=head, top_k=top_k, full=full)
    # the graph multiplies the indexer's queries and keys by a head-sized rotation and ropes the
    # first n_rot values of a head: llama.cpp aborts (GGML_ASSERT) on a head that fits neither
    if _hadamard_size(head) != head or anatomy.rope_dims > head:
        raise ModelError(
            anatomy.path,
            f"indexer key length {head} is not a power-of-two multiple of 64 at least the RoPE size "
            f"{anatomy.rope_dims} (llama.cpp aborts building its graph)",
        )
    anatomy.notes.append(
        f"sparse attention (DSA): an indexer key cache of {head} values a token and layer beside the latent one"
    )


def _deepseek32(anatomy: ModelAnatomy, meta: Meta) -> None:
    """DeepSeek V3.2: DeepSeek V3 with sparse attention (DSA). A lightning indexer per layer scores
    every cached token and keeps the top k for the latent attention; its keys (one head, RoPE'd and
    Hadamard-rotated) fill a second K-only cache (llama_model_deepseek32, llama_kv_cache_dsa)."""
    require(
        anatomy,
        meta,
        "expert_feed_forward_length",
        "expert_shared_count",
        "attention.q_lora_rank",
        "attention.kv_lora_rank",
        "attention.indexer.head_count",
        "attention.indexer.key_length",
        "attention.indexer.top_k",
        "expert_gating_func",
    )
    read_deepseek2(anatomy, meta)
    if not anatomy.latent_cache:
        raise ModelError(anatomy.path, "DEEPSEEK32 architecture requires MLA (key_length_mla and value_length_mla)")
    gating = meta.int_or("expert_gating_func", 0)  # no V2 default here
    if anatomy.experts is not None:
        anatomy.experts.gating_func = gating
    if gating not in (1, 2, 3, 4):  # softmax, sigmoid, softmax_weight, sqrt_softplus
        raise ModelError(anatomy.path, f"expert gating function {gating} is unknown (llama.cpp aborts)")
    _read_indexer(anatomy, meta)


Inputs = dict[str, Tensor]


def _kq_mask(ctx: GraphContext, type_: GGMLType) -> Tensor:
    s = ctx.shape
    n_stream = 1 if s.kv_unified else s.n_seqs
    return ctx.g.input(type_, (s.n_kv, ctx.n_tokens // n_stream, 1, n_stream), "attn_inp_kq_mask")


def build_attn_inp_k_dsa(ctx: GraphContext) -> Inputs:
    """Both caches' inputs: the latent cache's (its mask F16 only with flash attention) and the
    indexer cache's (always an F16 mask, and its head-sized rotation)."""
    g, n_tok = ctx.g, ctx.n_tokens
    head = ctx.model.sparse_indexer.head_size
    return {
        "k_idxs": g.input(I64, (n_tok,), "attn_inp_k_idxs"),
        "mask": _kq_mask(ctx, F16 if ctx.shape.flash_attn else F32),
        "k_idxs_lid": g.input(I64, (n_tok,), "attn_inp_k_idxs"),
        "mask_lid": _kq_mask(ctx, F16),
        "k_rot_lid": g.input(F32, (head, head), "attn_inp_k_rot"),
    }


def lightning_indexer(
    ctx: GraphContext, layer: LayerAnatomy, cur: Tensor, qr: Tensor, inp_pos: Tensor, inp: Inputs
) -> Tensor:
    """The cells each query token attends to: [top k, n_tokens per stream, 1, n_stream] indices."""
    g, w, indexer = ctx.g, ctx.w, ctx.model.sparse_indexer
    il, n_tok = layer.index, ctx.n_tokens
    n_head, head = indexer.n_head, indexer.head_size
    q = g.mul_mat(w.layer_req(il, "indexer.attn_q_b.weight"), qr)
    q = g.rope(g.reshape(q, head, n_head, n_tok), inp_pos)
    k = g.mul_mat(w.layer_req(il, "indexer.attn_k.weight"), cur)
    k = ctx.build_norm(k, w.layer(il, "indexer.k_norm.weight"), w.layer(il, "indexer.k_norm.bias"), rms=False, il=il)
    k = g.rope(g.reshape(k, head, 1, n_tok), inp_pos)
    q = g.mul_mat(inp["k_rot_lid"], q)
    k = g.mul_mat(inp["k_rot_lid"], k)
    cache = w.lid(il)
    g.expand(ctx.cpy_k(cache, k, inp["k_idxs_lid"]))
    weights = g.mul_mat(w.layer_req(il, "indexer.proj.weight"), cur)
    n_stream = cache.ne[2]
    row = row_size(cache.type, head)
    keys = g.view(cache, (head, 1, ctx.shape.n_kv, n_stream), (row, row, row * cache.ne[1]), 0)
    q = g.view(q, (q.ne[0], q.ne[1], q.ne[2] // n_stream, n_stream), (q.nb[1], q.nb[2], q.nb[3] // n_stream), 0)
    weights = g.view(
        weights,
        (weights.ne[0], weights.ne[1] // n_stream, weights.ne[2], n_stream),
        (weights.nb[1], weights.nb[2] // n_stream, weights.nb[3] // n_stream),
        0,
    )
    weights = g.scale(weights)
    score = g.lightning_indexer(q, keys, weights, inp["mask_lid"])
    return g.cont(g.top_k(score, min(score.ne[0], indexer.top_k)))


def build_attn_dsa(
    ctx: GraphContext,
    inp: Inputs,
    layer: LayerAnatomy,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    top_k: Tensor,
) -> Tensor:
    """build_attn for sparse attention: the causal mask with only the top-k cells left open."""
    g, w, il = ctx.g, ctx.w, layer.index
    g.expand(q)
    g.expand(v)
    g.expand(k)
    k_cache, _ = ctx.kv_cache_tensors(layer, False)
    g.expand(ctx.cpy_k(k_cache, k, inp["k_idxs"]))
    mask = inp["mask"]
    closed = g.fill(mask)  # every cell masked off, one value a row
    closed = g.view(closed, (1, closed.ne[0], closed.ne[1], closed.ne[3]), closed.nb[:3], 0)
    picked = g.view(
        top_k, (top_k.ne[0], top_k.ne[1], top_k.ne[3], 1), (top_k.nb[1], top_k.nb[2], top_k.ne[3] * top_k.nb[3]), 0
    )
    zeros = g.fill(g.new_tensor(F32, (1, picked.ne[0], picked.ne[1], picked.ne[2])))
    opened = g.set_rows(closed, zeros, picked)
    opened = g.view(
        opened, (opened.ne[1], opened.ne[2], 1, opened.ne[3]), (opened.nb[2], opened.nb[3], opened.nb[3]), 0
    )
    sparse_mask = g.add(opened, mask)
    kv = ctx.get_k(k_cache, layer, ctx.shape.n_kv)
    vv = g.view(kv, (v.ne[0], kv.ne[1], kv.ne[2], kv.ne[3]), kv.nb[1:], 0)
    cur = ctx.build_attn_mha(q, kv, vv, None, sparse_mask, None, v_mla=w.layer_req(il, "attn_v_b.weight"))
    return ctx.mm(w.layer_req(il, "attn_output.weight"), cur)


def build_deepseek32(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp = build_attn_inp_k_dsa(ctx)
    out_ids = ctx.build_inp_out_ids()
    indexer = m.sparse_indexer
    top_k: Tensor | None = None
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        qr = g.mul_mat(w.layer_req(il, "attn_q_a.weight"), cur)
        qr = ctx.build_norm(qr, w.layer(il, "attn_q_a_norm.weight"), il=il)
        if indexer.runs(il) or top_k is None:  # GLM DSA's shared layers reuse the last top k
            top_k = lightning_indexer(ctx, layer, cur, qr, inp_pos, inp)
        q = g.mul_mat(w.layer_req(il, "attn_q_b.weight"), qr)
        kv_cmpr, k_pe = kv_latent(ctx, il, cur, inp_pos)
        q_cur, k_cur, v_cur = absorbed_qkv(ctx, layer, q, kv_cmpr, k_pe, inp_pos)
        cur = build_attn_dsa(ctx, inp, layer, q_cur, k_cur, v_cur, top_k)
        inp_l = finish_layer(ctx, il, cur, inp_sa, out_ids)
    finish_model(ctx, inp_l)


# both families create the router's bias without the MTP block's skip flag (TENSOR_NOT_REQUIRED alone): llama.cpp
# loads it, and with the host's mapped weights the mapping spans the skipped tensors before it in the file
MTP_ROUTER_BIAS = ("exp_probs_b",)


def read_hparams(anatomy: ModelAnatomy, meta: Meta) -> None:
    (_glm_dsa if anatomy.architecture == "glm-dsa" else _deepseek32)(anatomy, meta)
    anatomy.mtp_loaded = MTP_ROUTER_BIAS


build_graph = build_deepseek32
