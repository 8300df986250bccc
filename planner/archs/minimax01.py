"""MiniMax-Text-01 (src/models/minimax-01.cpp): lightning-attention layers (a linear attention whose
per-head state is carried in the recurrent cache, with decays fed as inputs) and softmax attention
layers (every 8th by default) in one hybrid memory; post-norm residuals scaled by residual_scale;
softmax-routed experts on every layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import read_experts, require
from planner.errors import GGUFError
from planner.ggml_graph import F32, Tensor
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext
from planner.recurrent import n_embd_r, n_embd_s

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _minimax01(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_minimax_01::load_arch_hparams: the RMS epsilon and the residual scale are required; the
    # recurrent layers are an explicit array, else all but every full_attention_interval-th (8)
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "residual_scale")
    anatomy.n_embd_head_la = anatomy.layers[0].head_dim_k
    value = meta.get("attention.recurrent_layers")
    if isinstance(value, list):
        if len(value) != anatomy.n_layer:
            key = f"{anatomy.architecture}.attention.recurrent_layers"
            problem = f"key {key} has wrong array length; expected {anatomy.n_layer}, got {len(value)}"
            raise GGUFError(anatomy.path, problem)
        recurrent = [bool(v) for v in value]
    else:
        interval = meta.int_or("full_attention_interval", 8)
        recurrent = [il < anatomy.n_trunk and (il + 1) % interval != 0 for il in range(anatomy.n_layer)]
    for layer, is_recurrent in zip(anatomy.layers, recurrent):
        layer.is_recurrent = is_recurrent
        layer.has_kv = layer.has_kv and not is_recurrent
    read_experts(anatomy, meta)
    if anatomy.experts is not None:
        anatomy.experts.weights_scale = 0.0  # not read by this loader: no scale node


def _lightning(ctx: GraphContext, inp: dict[str, Tensor], la: dict[str, Tensor], cur: Tensor, il: int) -> Tensor:
    """The lightning-attention layer: SiLU'd fused Q/K/V, the intra-block (decayed Q·K, V) and inter-block
    (the carried state) parts, the new state stored, a norm, a sigmoid gate and the projection."""
    g, w, m = ctx.g, ctx.w, ctx.model
    hd, n_head = m.n_embd_head_la, m.layers[0].n_head
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    r_l, s_l = w.rs(il)
    g.expand(ctx.build_rs(inp, r_l, n_embd_r(m), n_seqs))
    slope_rate = g.scale(la["slopes"])
    cur = g.reshape(cur, cur.ne[0], n_seq_tokens, 1, n_seqs)
    qkv = g.unary(g.mul_mat(w.layer_req(il, "attn_qkv.weight"), cur))
    qkv = g.reshape(qkv, hd * 3, n_head, n_seq_tokens, n_seqs)
    es = qkv.type.type_size
    q, k, v = (g.view(qkv, (hd, n_head, n_seq_tokens, n_seqs), qkv.nb[1:], i * es * hd) for i in range(3))
    kv_old = g.reshape(ctx.build_rs(inp, s_l, n_embd_s(m), n_seqs), hd, hd, n_head, n_seqs)
    q_decay = g.unary(g.scale(la["q_decay"]))
    k_decay = g.unary(g.scale(la["k_decay"]))
    diag_decay = g.unary(g.scale(la["diag_decay"]))
    q_s = g.permute(g.mul(q, q_decay), 0, 2, 1, 3)
    none_diag = g.mul_mat(kv_old, q_s)
    qk = g.mul(g.mul_mat(g.permute(k, 0, 2, 1, 3), g.permute(q, 0, 2, 1, 3)), diag_decay)
    v_trans = g.cont(g.permute(v, 1, 2, 0, 3))
    out = g.add(none_diag, g.mul_mat(v_trans, qk))
    g.expand(out)
    block_decay = g.reshape(g.unary(g.scale(slope_rate)), 1, 1, n_head)
    kv_old_s = g.mul(kv_old, block_decay)
    k_trans = g.cont(g.permute(g.mul(k, k_decay), 1, 2, 0, 3))
    kv_new = g.add(kv_old_s, g.mul_mat(k_trans, v_trans))
    g.expand(g.cpy(kv_new, g.view(s_l, (n_embd_s(m) * n_seqs,), (), 0)))
    out = g.cont(g.permute(out, 0, 2, 1, 3))
    out = g.reshape(out, out.ne[0] * out.ne[1], out.ne[2], 1, out.ne[3])
    out = ctx.build_norm(out, w.layer(il, "attn_norm_2.weight"), il=il)
    gate = g.unary(g.mul_mat(w.layer_req(il, "attn_gate.weight"), cur))
    cur = g.mul_mat(w.layer_req(il, "attn_output.weight"), g.mul(gate, out))
    return g.reshape(cur, cur.ne[0], n_seq_tokens * n_seqs)


def build_minimax01(ctx: GraphContext) -> None:
    """llama_model_minimax_01::graph: the hybrid memory's inputs, the positions, the decay inputs; per
    layer attn_norm (its output the residual), attention or lightning attention, the scaled residual;
    ffn_norm (again the residual), softmax-routed experts, the scaled residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    n_head = m.layers[0].n_head
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    inp_l = ctx.build_inp_embd()
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_kv()
    inp_pos = ctx.build_inp_pos()
    out_ids = ctx.build_inp_out_ids()
    la = {
        "slopes": g.input(F32, (n_head,), "inp_slopes"),
        "q_decay": g.input(F32, (1, n_head, n_seq_tokens, n_seqs), "inp_q_decay"),
        "k_decay": g.input(F32, (1, n_head, n_seq_tokens, n_seqs), "inp_k_decay"),
        "diag_decay": g.input(F32, (n_seq_tokens, n_seq_tokens, n_head, n_seqs), "inp_diag_decay"),
    }
    experts = m.moe
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        residual = cur
        if layer.is_recurrent:
            cur = _lightning(ctx, rs_inp, la, cur, il)
        else:
            cur = ctx.build_plain_attn(inp_attn, layer, cur, inp_pos)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
            residual = g.get_rows(residual, out_ids)
        ffn_inp = g.add(cur, g.scale(residual))
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        residual = cur
        cur = ctx.build_moe_ffn(cur, il, experts.n_expert, experts.n_used, "silu", True, 0.0)
        inp_l = g.add(cur, g.scale(residual))
    final_output(ctx, inp_l)


read_hparams = _minimax01
build_graph = build_minimax01
