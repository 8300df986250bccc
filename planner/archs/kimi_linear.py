"""Kimi Linear (src/models/kimi-linear.cpp): Kimi Delta Attention layers (recurrent: short convolutions
over Q, K and V, a per-channel decay gate, the fused gated delta net, a gated RMS norm) between
multi-head latent attention layers without positions (the KV cache holds the compressed latent
only); a dense FFN in the leading layers, then sigmoid-routed experts with a selection bias plus a
shared expert.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import read_experts, recurrent_where_no_kv_heads, require, require_output
from planner.archs.qwen3next import _delta_net, _l2_norm
from planner.errors import GGUFError
from planner.ggml_graph import Tensor, row_size
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext
from planner.hparams import GATING_NAMES, KimiDeltaAttention, LatentAttention
from planner.model import LayerAnatomy
from planner.recurrent import n_embd_r, n_embd_s

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy

_REQUIRED = (
    "attention.layer_norm_rms_epsilon",
    "attention.key_length_mla",
    "attention.value_length_mla",
    "attention.kv_lora_rank",
    "ssm.conv_kernel",
    "kda.head_dim",
    "expert_feed_forward_length",
    "expert_shared_count",
    "expert_gating_func",
)


def read_kimi_linear(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_kimi_linear::load_arch_hparams: the layers without KV heads are the recurrent (KDA) ones;
    # the latent sizes make it an MLA model (hparams.is_mla), so the attention cache holds K only
    require(anatomy, meta, *_REQUIRED)
    require_output(anatomy)
    recurrent_where_no_kv_heads(anatomy)
    anatomy.kda = KimiDeltaAttention(head_dim=meta.int_or("kda.head_dim", 0), d_conv=meta.int_or("ssm.conv_kernel", 0))
    anatomy.mla = LatentAttention(
        n_lora_q=0,
        n_lora_kv=meta.int_or("attention.kv_lora_rank", 0),
        head_k=meta.int_or("attention.key_length_mla", 0),
        head_v=meta.int_or("attention.value_length_mla", 0),
        latent_cache=True,
    )
    for layer in anatomy.layers:  # the graph needs the absorbed projections (wk_b, wv_b) on every MLA layer
        if layer.has_kv and layer.tensor("attn_k_b.weight") is None:
            problem = (
                f"kimi-linear layer {layer.index} has no attn_k_b/attn_v_b (an unabsorbed attn_kv_b): "
                "llama.cpp aborts building its graph"
            )
            raise GGUFError(anatomy.path, problem)
    read_experts(anatomy, meta)
    if anatomy.experts is not None:
        experts = anatomy.experts
        experts.n_layer_dense_lead = meta.int_or("leading_dense_block_count", 0)
        if experts.gating_func not in GATING_NAMES:  # 0 (none) makes build_moe_ffn abort
            problem = f"expert_gating_func {experts.gating_func} is unknown: llama.cpp aborts building the graph"
            raise GGUFError(anatomy.path, problem)


def kda_conv(ctx: GraphContext, r_l: Tensor, states: Tensor, which: int, x: Tensor, il: int, name: str) -> Tensor:
    """causal_conv1d: prepend the stored convolution state (the which-th of Q, K, V), store the new
    one, convolve, SiLU; [head_dim, n_head, n_seq_tokens, n_seqs]."""
    g, w, m = ctx.g, ctx.w, ctx.model
    kda = m.kda
    assert kda is not None
    n_head = m.layers[0].n_head
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    d_conv, d_inner = kda.d_conv, n_head * kda.head_dim
    size = (d_conv - 1) * d_inner
    es = states.type.type_size
    state = g.view(states, (d_conv - 1, d_inner, n_seqs), ((d_conv - 1) * es, 3 * size * es), which * size * es)
    proj = w.layer(il, f"attn_{'qkv'[which]}.weight")
    x = ctx.g.mul_mat(proj, x) if proj is not None else x
    x = g.reshape(x, d_inner, n_seq_tokens, n_seqs)
    conv_x = g.concat(state, g.transpose(x), 0)
    last = g.view(conv_x, (d_conv - 1, d_inner, n_seqs), conv_x.nb[1:3], n_seq_tokens * conv_x.nb[0])
    es_r = r_l.type.type_size
    dst = g.view(r_l, (d_conv - 1, d_inner, n_seqs), ((d_conv - 1) * es_r, 3 * size * es_r), which * size * es_r)
    g.expand(g.cpy(last, dst))
    kernel = g.reshape(w.layer_req(il, name), d_conv, d_inner)
    out = g.op("SSM_CONV", conv_x.type, (d_inner, n_seq_tokens, n_seqs), [conv_x, kernel])
    out = g.unary(g.reshape(out, d_inner, ctx.n_tokens))
    return g.reshape(out, kda.head_dim, n_head, n_seq_tokens, n_seqs)


def _kda(ctx: GraphContext, inp: dict[str, Tensor], cur: Tensor, il: int) -> Tensor:
    """The KDA layer: convolved Q, K, V; the decay gate and beta; the fused delta net on the recurrent
    state; the output's gated RMS norm and projection."""
    g, w, m = ctx.g, ctx.w, ctx.model
    kda = m.kda
    assert kda is not None
    n_head, hd = m.layers[0].n_head, kda.head_dim
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    r_l, s_l = w.rs(il)
    states = ctx.build_rs(inp, r_l, n_embd_r(m), n_seqs)
    q = kda_conv(ctx, r_l, states, 0, cur, il, "ssm_conv1d_q.weight")
    k = kda_conv(ctx, r_l, states, 1, cur, il, "ssm_conv1d_k.weight")
    v = kda_conv(ctx, r_l, states, 2, cur, il, "ssm_conv1d_v.weight")
    decay = g.mul_mat(w.layer_req(il, "ssm_f_b.weight"), g.mul_mat(w.layer_req(il, "ssm_f_a.weight"), cur))
    decay = g.reshape(g.unary(g.add(decay, w.layer_req(il, "ssm_dt.bias"))), hd, n_head, ctx.n_tokens)
    decay = g.mul(decay, g.reshape(w.layer_req(il, "ssm_a"), 1, n_head, 1))
    decay = g.reshape(decay, hd, n_head, n_seq_tokens, n_seqs)
    beta = g.mul_mat(w.layer_req(il, "ssm_beta.weight"), cur)
    beta = g.unary(g.reshape(beta, 1, n_head, n_seq_tokens, n_seqs))
    cur = g.reshape(cur, cur.ne[0], n_seq_tokens, n_seqs)
    state = g.reshape(ctx.build_rs(inp, s_l, n_embd_s(m), n_seqs), hd, hd, n_head, n_seqs)
    q, k = _l2_norm(ctx, q), _l2_norm(ctx, k)
    out = g.cont(_delta_net(ctx, inp, q, k, v, decay, beta, state, il))
    gate = g.mul_mat(w.layer_req(il, "ssm_g_a.weight"), g.reshape(cur, cur.ne[0], n_seq_tokens * n_seqs))
    gate = g.reshape(g.mul_mat(w.layer_req(il, "ssm_g_b.weight"), gate), hd, n_head, n_seq_tokens * n_seqs)
    out = ctx.build_norm(g.reshape(out, hd, n_head, n_seq_tokens * n_seqs), w.layer(il, "ssm_norm.weight"), il=il)
    out = g.cont(g.mul(out, g.unary(gate)), (hd * n_head, ctx.n_tokens, 1, 1))
    return g.mul_mat(w.layer_req(il, "attn_output.weight"), out)


def _mla(ctx: GraphContext, inp: dict[str, Tensor | None], layer: LayerAnatomy, cur: Tensor) -> Tensor:
    """The latent attention layer (absorbed projections, no RoPE): Q with its no-position part absorbed
    into the latent, K the normed latent and the shared part, V the latent; wv_b expands the output."""
    g, w, m = ctx.g, ctx.w, ctx.model
    mla = m.latent_attention
    il, n_head, n_tok = layer.index, layer.n_head, ctx.n_tokens
    rope, rank = m.rope_dims, mla.n_lora_kv
    nope = mla.head_k - rope
    q = g.mul_mat(w.layer_req(il, "attn_q.weight"), cur)
    kv_pe = g.mul_mat(w.layer_req(il, "attn_kv_a_mqa.weight"), cur)
    stride = row_size(kv_pe.type, rank + rope)
    kv = g.view(kv_pe, (rank, n_tok), (stride,), 0)
    k_pe = g.view(kv_pe, (rope, 1, n_tok), (stride, stride), row_size(kv_pe.type, rank))
    kv = ctx.build_norm(kv, w.layer(il, "attn_kv_a_norm.weight"), il=il)
    strides = (row_size(q.type, mla.head_k), row_size(q.type, mla.head_k) * n_head)
    q_nope = g.permute(g.view(q, (nope, n_head, n_tok), strides, 0), 0, 2, 1, 3)
    q_pe = g.view(q, (rope, n_head, n_tok), strides, row_size(q.type, nope))
    q_abs = g.permute(g.mul_mat(w.layer_req(il, "attn_k_b.weight"), q_nope), 0, 2, 1, 3)
    q = g.concat(q_abs, q_pe, 0)
    kv = g.reshape(kv, rank, 1, n_tok)
    k = g.concat(kv, k_pe, 0)
    wo, wv_b = w.layer(il, "attn_output.weight"), w.layer_req(il, "attn_v_b.weight")
    return ctx.build_attn_k(inp, layer, wo, q, k, kv, v_mla=wv_b)


def build_kimi_linear(ctx: GraphContext) -> None:
    """llama_model_kimi_linear::graph: per layer attn_norm, then the KDA layer or latent attention,
    residual; ffn_norm, SwiGLU in the leading layers, else experts plus the shared expert, residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_k()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        g.expand(cur)
        cur = _kda(ctx, rs_inp, cur, il) if layer.is_recurrent else _mla(ctx, inp_attn, layer, cur)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        experts = m.experts
        if experts is None or il < experts.n_layer_dense_lead:
            cur = ctx.build_layer_ffn(cur, il)
        else:
            cur = ctx.build_routed_experts(cur, il, experts, shared=True, norm_w=True)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = read_kimi_linear
build_graph = build_kimi_linear
