"""Ling 3 (src/models/bailingmoe3.cpp): Kimi Linear's shape (planner.archs.kimi_linear): Kimi Delta
Attention layers between latent attention layers, here with a bounded sigmoid decay from one
projection, RoPE (multi-section with rope.dimension_sections) on the latent layers' shared key part
and a sigmoid gate per head on their output; a dense FFN in the leading layers, then routed experts
plus a shared expert (with optional SwiGLU limits); every token reaches the output norm (the
multi-token-prediction input) and the output rows are picked after it; its multi-token-prediction
layer is skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import read_experts, read_swiglu_clamps, recurrent_where_no_kv_heads, require
from planner.archs.kimi_linear import kda_conv
from planner.archs.qwen3next import _delta_net, _l2_norm
from planner.errors import GGUFError
from planner.ggml_graph import FLAG_OUTPUT, Tensor, row_size
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
    "kda.gate_lower_bound",
    "expert_feed_forward_length",
    "expert_shared_count",
    "leading_dense_block_count",
    "expert_gating_func",
)


def _bailingmoe3(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_bailingmoe3::load_arch_hparams: the layers without KV heads are recurrent (KDA); it
    # asserts a safe gate with a negative lower bound; rope sections make the latent layers' RoPE M-RoPE
    require(anatomy, meta, *_REQUIRED)
    if not meta.get("kda.safe_gate", True) or meta.float_or("kda.gate_lower_bound", 0.0) >= 0.0:
        problem = "bailingmoe3 needs kda.safe_gate and a negative kda.gate_lower_bound (llama.cpp aborts)"
        raise GGUFError(anatomy.path, problem)
    recurrent_where_no_kv_heads(anatomy)
    for layer in anatomy.layers:  # the multi-token-prediction layer is an attention layer: the hybrid
        if layer.is_mtp:  # memory gives it a KV cache too, though the graph never runs it
            layer.is_recurrent, layer.has_kv = False, True
    anatomy.kda = KimiDeltaAttention(head_dim=meta.int_or("kda.head_dim", 0), d_conv=meta.int_or("ssm.conv_kernel", 0))
    anatomy.mla = LatentAttention(
        n_lora_q=meta.int_or("attention.q_lora_rank", 0),
        n_lora_kv=meta.int_or("attention.kv_lora_rank", 0),
        head_k=meta.int_or("attention.key_length_mla", 0),
        head_v=meta.int_or("attention.value_length_mla", 0),
        latent_cache=True,
    )
    sections = meta.get("rope.dimension_sections")
    if isinstance(sections, list) and len(sections) >= 2 and sections[0] > 0 and sections[1] > 0:
        anatomy.n_pos_per_embd = 4
    read_swiglu_clamps(anatomy, meta)
    read_experts(anatomy, meta)
    if anatomy.experts is not None:
        experts = anatomy.experts
        experts.n_layer_dense_lead = meta.int_or("leading_dense_block_count", 0)
        if experts.gating_func not in GATING_NAMES:  # 0 (none) makes build_moe_ffn abort
            problem = f"expert_gating_func {experts.gating_func} is unknown: llama.cpp aborts building the graph"
            raise GGUFError(anatomy.path, problem)


def _kda(ctx: GraphContext, inp: dict[str, Tensor], cur: Tensor, il: int) -> Tensor:
    """The KDA layer: convolved Q, K, V; the bounded sigmoid decay and beta; the fused delta net; the
    output's gated RMS norm and projection."""
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
    decay = g.add(g.mul_mat(w.layer_req(il, "ssm_f_a.weight"), cur), w.layer_req(il, "ssm_dt.bias"))
    decay = g.mul(g.reshape(decay, hd, n_head, ctx.n_tokens), g.reshape(w.layer_req(il, "ssm_a"), 1, n_head, 1))
    decay = g.reshape(g.scale(g.unary(decay)), hd, n_head, n_seq_tokens, n_seqs)
    beta = g.mul_mat(w.layer_req(il, "ssm_beta.weight"), cur)
    beta = g.unary(g.reshape(beta, 1, n_head, n_seq_tokens, n_seqs))
    q, k = _l2_norm(ctx, q), _l2_norm(ctx, k)
    state = g.reshape(ctx.build_rs(inp, s_l, n_embd_s(m), n_seqs), hd, hd, n_head, n_seqs)
    out = g.cont(_delta_net(ctx, inp, q, k, v, decay, beta, state, il))
    gate = g.reshape(g.mul_mat(w.layer_req(il, "ssm_g_a.weight"), cur), hd, n_head, ctx.n_tokens)
    out = ctx.build_norm(g.reshape(out, hd, n_head, ctx.n_tokens), w.layer(il, "ssm_norm.weight"), il=il)
    out = g.mul(out, g.unary(gate))
    return g.mul_mat(w.layer_req(il, "attn_output.weight"), g.cont(out, (hd * n_head, ctx.n_tokens, 1, 1)))


def _mla(ctx: GraphContext, inp: dict[str, Tensor | None], layer: LayerAnatomy, cur: Tensor, inp_pos: Tensor) -> Tensor:
    """The latent attention layer (absorbed projections): RoPE on the shared parts, a sigmoid gate per
    head on the expanded output, then the projection."""
    g, w, m = ctx.g, ctx.w, ctx.model
    mla = m.latent_attention
    il, n_head, n_tok = layer.index, layer.n_head, ctx.n_tokens
    rope, rank = m.rope_dims, mla.n_lora_kv
    nope = mla.head_k - rope
    attn_input = cur
    if w.layer(il, "attn_q_a.weight") is not None:
        q = g.mul_mat(w.layer_req(il, "attn_q_a.weight"), cur)
        q = ctx.build_norm(q, w.layer(il, "attn_q_a_norm.weight"), il=il)
        q = g.mul_mat(w.layer_req(il, "attn_q_b.weight"), q)
    else:
        q = g.mul_mat(w.layer_req(il, "attn_q.weight"), cur)
    strides = (row_size(q.type, mla.head_k), row_size(q.type, mla.head_k) * n_head)
    q_nope = g.view(q, (nope, n_head, n_tok), strides, 0)
    q_pe = g.view(q, (rope, n_head, n_tok), strides, row_size(q.type, nope))
    kv_pe = g.mul_mat(w.layer_req(il, "attn_kv_a_mqa.weight"), cur)
    stride = row_size(kv_pe.type, rank + rope)
    kv = g.view(kv_pe, (rank, n_tok), (stride,), 0)
    k_pe = g.view(kv_pe, (rope, 1, n_tok), (stride, stride), row_size(kv_pe.type, rank))
    q_pe = g.rope(q_pe, inp_pos)
    k_pe = g.rope(k_pe, inp_pos)
    kv = ctx.build_norm(kv, w.layer(il, "attn_kv_a_norm.weight"), il=il)
    q_nope = g.permute(g.mul_mat(w.layer_req(il, "attn_k_b.weight"), g.permute(q_nope, 0, 2, 1, 3)), 0, 2, 1, 3)
    q = g.concat(q_nope, q_pe, 0)
    kv = g.reshape(kv, rank, 1, n_tok)
    k = g.concat(kv, k_pe, 0)
    cur = ctx.build_attn_k(inp, layer, None, q, k, kv, v_mla=w.layer_req(il, "attn_v_b.weight"))
    gate = g.mul_mat(w.layer_req(il, "attn_gate.weight"), attn_input)
    gate = g.unary(g.reshape(gate, 1, n_head, n_tok))
    cur = g.mul(g.reshape(cur, mla.head_v, n_head, n_tok), gate)
    return g.mul_mat(w.layer_req(il, "attn_output.weight"), g.cont(cur, (mla.head_v * n_head, n_tok, 1, 1)))


def build_bailingmoe3(ctx: GraphContext) -> None:
    """llama_model_bailingmoe3::graph: per layer attn_norm, the KDA layer or latent attention, residual;
    ffn_norm, SwiGLU in the leading layers, else experts plus the shared expert, residual; the output
    norm over every token (a graph output), its output rows, the LM head."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_k()
    inp_pos = ctx.build_inp_pos()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        cur = _kda(ctx, rs_inp, cur, il) if layer.is_recurrent else _mla(ctx, inp_attn, layer, cur, inp_pos)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        experts = m.experts
        if experts is None or il < experts.n_layer_dense_lead:
            cur = ctx.build_layer_ffn(cur, il)
        else:
            cur = ctx.build_routed_experts(cur, il, experts, shared=True)
        inp_l = g.add(cur, ffn_inp)
    h_nextn = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    h_nextn.flags |= FLAG_OUTPUT  # t_h_nextn, the multi-token-prediction head's input, is a graph output
    cur = g.get_rows(h_nextn, out_ids)
    ctx.set_outputs(cur, g.mul_mat(ctx.output_weight(), cur))


read_hparams = _bailingmoe3
build_graph = build_bailingmoe3
