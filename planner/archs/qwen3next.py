"""Qwen3-Next and Qwen3.5 (src/models/qwen3next.cpp, qwen35.cpp, qwen35moe.cpp): gated delta-net layers
(conv + recurrent state) and gated full-attention layers; experts in qwen3next and qwen35moe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_experts,
    read_ssm,
)
from planner.errors import GGUFError
from planner.ggml_graph import F32, FLAG_OUTPUT, Tensor
from planner.graphs.context import GraphContext
from planner.model import LayerAnatomy
from planner.recurrent import n_embd_r, n_embd_s

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def read_qwen3next(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Qwen3-Next: gated delta-net layers (conv + recurrent state) and full-attention layers, MoE FFN."""
    read_experts(anatomy, meta)
    read_ssm(anatomy, meta)
    n_trunk = anatomy.n_trunk
    value = meta.get("attention.recurrent_layers")
    if isinstance(value, list) and len(value) == anatomy.n_layer:
        recurrent = [bool(v) and il < n_trunk for il, v in enumerate(value)]
    else:
        interval = meta.int_or("full_attention_interval", 4)
        if interval <= 0:
            raise GGUFError(anatomy.path, f"{anatomy.architecture}: full attention interval {interval} is out of range")
        recurrent = [il < n_trunk and (il + 1) % interval != 0 for il in range(anatomy.n_layer)]
    for layer, is_recurrent in zip(anatomy.layers, recurrent):
        layer.is_recurrent = is_recurrent
        layer.has_kv = layer.has_kv and not is_recurrent


def _qwen35(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Qwen3.5: Qwen3-Next's layers (dense FFN in qwen35, experts in qwen35moe), multi-section RoPE."""
    read_qwen3next(anatomy, meta)
    anatomy.n_pos_per_embd = 4


def _dims(ctx: GraphContext) -> tuple[int, int, int, int]:
    """(head_k_dim, num_k_heads, head_v_dim, num_v_heads) of the delta-net layers."""
    ssm = ctx.model.state_space
    n_v = ssm.dt_rank
    return ssm.d_state, ssm.n_group, ssm.d_inner // n_v, n_v


def _split4(ctx: GraphContext, t: Tensor, ne0: int, n_heads: int, offset: int) -> Tensor:
    """ggml_view_4d of a [.., n_heads, n_seq_tokens, n_seqs] tensor with t's strides."""
    n_seq_tokens, n_seqs = ctx.n_tokens // ctx.shape.n_seqs, ctx.shape.n_seqs
    return ctx.g.view(t, (ne0, n_heads, n_seq_tokens, n_seqs), t.nb[1:], offset)


def _qkvz(ctx: GraphContext, cur: Tensor, il: int) -> tuple[Tensor, Tensor]:
    """build_qkvz: the mixed q/k/v rows [conv_dim, n_seq_tokens, n_seqs] and the output gate z."""
    g, w = ctx.g, ctx.w
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    head_k, n_k, head_v, n_v = _dims(ctx)
    wqkv = w.layer(il, "attn_qkv.weight")
    if wqkv is not None:
        qkv = ctx.mm(wqkv, cur)
        qkv = g.reshape(qkv, qkv.ne[0], n_seq_tokens, n_seqs)
        return qkv, ctx.mm(w.layer_req(il, "attn_gate.weight"), cur)
    mixed = ctx.mm(w.layer_req(il, "ssm_in.weight"), cur)  # the legacy fused q/k/v/z projection
    per_group = head_v * n_v // n_k
    mixed = g.reshape(mixed, 2 * head_k + 2 * per_group, n_k, n_seq_tokens, n_seqs)
    es = mixed.type.type_size
    q = _split4(ctx, mixed, head_k, n_k, 0)
    k = _split4(ctx, mixed, head_k, n_k, head_k * es)
    v = _split4(ctx, mixed, per_group, n_k, 2 * head_k * es)
    z = g.cont(_split4(ctx, mixed, per_group, n_k, (2 * head_k + per_group) * es))
    q = g.cont(q, (head_k * n_k, n_seq_tokens, n_seqs))
    k = g.cont(k, (head_k * n_k, n_seq_tokens, n_seqs))
    v = g.cont(v, (head_v * n_v, n_seq_tokens, n_seqs))
    return g.concat(g.concat(q, k, 0), v, 0), z


def _conv_state(ctx: GraphContext, inp: dict[str, Tensor], qkv: Tensor, il: int) -> Tensor:
    """build_conv_state: prepend the stored convolution state, store the new one (n_rs_seq = 0)."""
    g, ssm = ctx.g, ctx.model.state_space
    r_l, _ = ctx.w.rs(il)
    n_seqs = ctx.shape.n_seqs
    d_conv = ctx.w.layer_req(il, "ssm_conv1d.weight").ne[0]
    channels = ssm.d_inner + 2 * ssm.n_group * ssm.d_state
    states = ctx.build_rs(inp, r_l, n_embd_r(ctx.model), n_seqs)
    states = g.reshape(states, d_conv - 1, channels, n_seqs)
    conv_input = g.concat(states, g.transpose(qkv), 0)
    last = g.view(
        conv_input,
        (d_conv - 1, channels, n_seqs),
        (conv_input.nb[1], conv_input.nb[2]),
        (conv_input.ne[0] - states.ne[0]) * conv_input.type.type_size,
    )
    g.expand(g.cpy(last, g.view(r_l, ((d_conv - 1) * channels, n_seqs), (r_l.nb[1],), 0)))
    return conv_input


def _l2_norm(ctx: GraphContext, t: Tensor) -> Tensor:
    """build_gdn_l2_norm: an RMS norm scaled down."""
    return ctx.g.scale(ctx.g.rms_norm(t))


def _repeat_heads(ctx: GraphContext, t: Tensor, n_k: int, n_v: int) -> Tensor:
    """Repeat-interleave the key heads up to the value heads."""
    g = ctx.g
    head, n_seq_tokens, n_seqs = t.ne[0], t.ne[2], t.ne[3]
    t = g.reshape(t, head, 1, n_k, n_seq_tokens * n_seqs)
    t = g.repeat(t, (head, n_v // n_k, n_k, n_seq_tokens * n_seqs))
    return g.reshape(t, head, n_v, n_seq_tokens, n_seqs)


def _delta_net(
    ctx: GraphContext,
    inp: dict[str, Tensor],
    q: Tensor,
    k: Tensor,
    v: Tensor,
    gate: Tensor,
    beta: Tensor,
    state: Tensor,
    il: int,
) -> Tensor:
    """build_recurrent_attn with the fused op: the output view; the new state is copied into s."""
    g = ctx.g
    _, s_l = ctx.w.rs(il)
    s_v, h_v, n_seq_tokens, n_seqs = v.ne
    out = g.gated_delta_net(q, k, v, gate, beta, state)
    es = out.type.type_size
    output = g.view(out, (s_v, h_v, n_seq_tokens, n_seqs), (es * s_v, es * s_v * h_v, es * s_v * h_v * n_seq_tokens), 0)
    new_state = g.view(
        out,
        (s_v, s_v, h_v, n_seqs),
        (es * s_v, es * s_v * s_v, es * s_v * s_v * h_v),
        es * s_v * h_v * n_seq_tokens * n_seqs,
    )
    g.expand(g.cpy(new_state, g.view(s_l, (n_embd_s(ctx.model), n_seqs), (s_l.nb[1],), 0)))
    return output


def _linear_attn(ctx: GraphContext, inp: dict[str, Tensor], cur: Tensor, il: int) -> Tensor:
    """build_layer_attn_linear: the gated delta-net layer."""
    g, w = ctx.g, ctx.w
    n_seqs = ctx.shape.n_seqs
    n_seq_tokens = ctx.n_tokens // n_seqs
    head_k, n_k, head_v, n_v = _dims(ctx)
    qkv, z = _qkvz(ctx, cur, il)
    qwen35 = w.layer(il, "ssm_beta.weight") is not None
    if qwen35:  # Qwen3.5: beta and alpha from projections of their own
        beta = g.unary(g.reshape(ctx.mm(w.layer_req(il, "ssm_beta.weight"), cur), 1, n_v, n_seq_tokens, n_seqs))
        alpha = g.reshape(ctx.mm(w.layer_req(il, "ssm_alpha.weight"), cur), n_v, n_seq_tokens, n_seqs)
        gate = g.mul(g.unary(g.add(alpha, w.layer_req(il, "ssm_dt.bias"))), w.layer_req(il, "ssm_a"))
        gate = g.reshape(gate, 1, n_v, n_seq_tokens, n_seqs)
    else:  # Qwen3-Next: one projection split in two
        ba = g.reshape(ctx.mm(w.layer_req(il, "ssm_ba.weight"), cur), 2 * n_v // n_k, n_k, n_seq_tokens, n_seqs)
        b = _split4(ctx, ba, n_v // n_k, n_k, 0)
        a = _split4(ctx, ba, n_v // n_k, n_k, n_v // n_k * ba.type.type_size)
        beta = g.unary(g.cont(b))
        alpha = g.cont(a, (n_v, n_seq_tokens, n_seqs))
        gate = g.mul(g.unary(g.add(alpha, w.layer_req(il, "ssm_dt.bias"))), w.layer_req(il, "ssm_a"))
        beta = g.reshape(beta, 1, n_v, n_seq_tokens, n_seqs)
        gate = g.reshape(gate, 1, n_v, n_seq_tokens, n_seqs)
    conv_input = _conv_state(ctx, inp, qkv, il)
    _, s_l = w.rs(il)
    state = ctx.build_rs(inp, s_l, n_embd_s(ctx.model), n_seqs)
    state = g.reshape(state, head_v, head_v, n_v, n_seqs)
    kernel = w.layer_req(il, "ssm_conv1d.weight")
    conv = g.op(
        "SSM_CONV", F32, (kernel.ne[1], conv_input.ne[0] - kernel.ne[0] + 1, conv_input.ne[2]), [conv_input, kernel]
    )
    conv = g.unary(conv)
    row = conv.type.type_size * (2 * head_k * n_k + head_v * n_v)
    strides = (conv.type.type_size * head_k, row, row * n_seq_tokens)
    q = g.view(conv, (head_k, n_k, n_seq_tokens, n_seqs), strides, 0)
    k = g.view(conv, (head_k, n_k, n_seq_tokens, n_seqs), strides, head_k * n_k * conv.type.type_size)
    v = g.view(
        conv,
        (head_v, n_v, n_seq_tokens, n_seqs),
        (conv.type.type_size * head_v, row, row * n_seq_tokens),
        2 * head_k * n_k * conv.type.type_size,
    )
    q, k = _l2_norm(ctx, q), _l2_norm(ctx, k)
    if n_k != n_v and not qwen35:  # Qwen3.5's fused delta-net op broadcasts the heads itself
        q, k = _repeat_heads(ctx, q, n_k, n_v), _repeat_heads(ctx, k, n_k, n_v)
    out = _delta_net(ctx, inp, q, k, v, gate, beta, state, il)
    z = g.reshape(z, head_v, n_v, n_seq_tokens, n_seqs)
    out = g.mul(ctx.build_norm(out, w.layer(il, "ssm_norm.weight"), il=il), g.unary(z))
    out = g.reshape(out, head_v * n_v, n_seq_tokens, n_seqs)
    out = ctx.mm(w.layer_req(il, "ssm_out.weight"), out)
    return g.reshape(out, ctx.n_embd, n_seq_tokens * n_seqs)


def _gated_attn(
    ctx: GraphContext, inp: dict[str, Tensor | None], layer: LayerAnatomy, cur: Tensor, inp_pos: Tensor
) -> Tensor:
    """build_layer_attn: one projection gives the queries and a sigmoid output gate."""
    g, w, il = ctx.g, ctx.w, layer.index
    hd, n_head, n_kv, n_tok = layer.head_dim_k, layer.n_head, layer.n_head_kv, ctx.n_tokens
    q_full, k, v = ctx.build_qkv(layer, cur, hd * 2, n_head, hd, n_kv, hd, reshape=False)
    q_full = g.reshape(q_full, hd * 2, n_head, n_tok, 1)
    q = g.view(q_full, (hd, n_head, n_tok, 1), q_full.nb[1:], 0)
    gate = g.view(q_full, (hd, n_head, n_tok, 1), q_full.nb[1:], hd * q_full.type.type_size)
    k = g.reshape(k, hd, n_kv, n_tok)
    v = g.reshape(v, hd, n_kv, n_tok)
    q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
    k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
    q = g.rope(q, inp_pos)
    k = g.rope(k, inp_pos)
    cur = ctx.build_attn(inp, layer, None, None, q, k, v)
    gate = g.unary(g.cont(gate, (hd * n_head, n_tok)))
    return ctx.mm(w.layer_req(il, "attn_output.weight"), g.mul(cur, gate))


def _ffn(ctx: GraphContext, cur: Tensor, il: int) -> Tensor:
    """build_layer_ffn: routed experts (softmax, normalised weights) plus the sigmoid-gated shared expert."""
    g, w = ctx.g, ctx.w
    if w.layer(il, "ffn_gate_inp.weight") is None:
        return ctx.build_layer_ffn(cur, il)
    # qwen3next does not read expert_weights_scale: the weights are never scaled
    experts = ctx.model.moe
    moe = ctx.build_moe_ffn(cur, il, experts.n_expert, experts.n_used, "silu", True, 0.0)
    if w.layer(il, "ffn_up_shexp.weight") is None:
        return moe
    shared = ctx.build_shared_expert(cur, il)
    shared_gate = g.unary(ctx.mm(w.layer_req(il, "ffn_gate_inp_shexp.weight"), cur))
    return g.add(moe, g.mul(shared, shared_gate))


def build_qwen3next(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_kv()
    inp_pos = ctx.build_inp_pos()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        g.expand(cur)
        if layer.is_recurrent:
            cur = _linear_attn(ctx, rs_inp, cur, il)
        else:
            cur = _gated_attn(ctx, inp_attn, layer, cur, inp_pos)
        residual = g.add(cur, inp_l)
        cur = _ffn(ctx, ctx.build_norm(residual, w.layer(il, "post_attention_norm.weight"), il=il), il)
        inp_l = g.add(cur, residual)
    h_nextn = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    h_nextn.flags |= FLAG_OUTPUT  # t_h_nextn, the MTP head's input, is a graph output too
    cur = g.get_rows(h_nextn, out_ids)
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur))


def read_hparams(anatomy: ModelAnatomy, meta: Meta) -> None:
    (read_qwen3next if anatomy.architecture == "qwen3next" else _qwen35)(anatomy, meta)


build_graph = build_qwen3next
