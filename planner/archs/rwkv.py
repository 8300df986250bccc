"""RWKV-6 and RWKV-7 (src/models/rwkv6.cpp, rwkv7.cpp, graph-context-rwkv): every layer recurrent
(token shift + WKV state), no KV cache. RWKV6-Qwen2 (QRWKV, rwkv6qwen2.cpp) and ARWKV-7 (arwkv7.cpp)
put those time mixes into a transformer's layer: RMS norms, one token shift, a SwiGLU FFN; QRWKV's time
mix has biases, grouped K/V heads and gated linear attention instead of WKV6.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from planner.errors import GGUFError
from planner.ggml_graph import F32, Tensor
from planner.graphs.context import GraphContext
from planner.hparams import (
    Rwkv,
)
from planner.recurrent import n_embd_r, n_embd_s

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _rwkv(anatomy: ModelAnatomy, meta: Meta) -> None:
    """RWKV-6 / RWKV-7: every layer recurrent (token shift + WKV state), no KV cache."""
    head = meta.int_or("wkv.head_size", 0)
    if not 0 < head <= 4096 or anatomy.n_embd % head:
        raise GGUFError(
            anatomy.path,
            f"{anatomy.architecture}: wkv head size {head} does not divide the embedding length {anatomy.n_embd}",
        )
    anatomy.rwkv = Rwkv(
        head_size=head,
        token_shift_count=meta.int_or("token_shift_count", 2),
        rescale_every_n_layers=meta.int_or("rescale_every_n_layers", 0),
    )
    if anatomy.architecture in _WITH_FFN and anatomy.rwkv.token_shift_count != 1:
        # their graphs GGML_ASSERT(n_embd == n_embd_r()): one token shift
        problem = f"{anatomy.architecture}: token_shift_count must be 1 (llama.cpp aborts building its graph)"
        raise GGUFError(anatomy.path, problem)
    for layer in anatomy.layers:
        layer.is_recurrent = True
        layer.has_kv = False


# the architectures whose layers end in a transformer's FFN (one token shift, RMS norms)
_WITH_FFN = ("rwkv6qwen2", "arwkv7")


# time mix of one layer: (ctx, rs inputs, normed input, previous tokens, first layer's value, layer) -> (out, value)
TimeMix = Callable[[GraphContext, dict[str, Tensor], Tensor, Tensor, Tensor | None, int], tuple[Tensor, Tensor | None]]


ChannelMix = Callable[[GraphContext, Tensor, Tensor, int], Tensor]


def _seq_shape(ctx: GraphContext) -> tuple[int, int]:
    n_seqs = ctx.shape.n_seqs
    return ctx.n_tokens // n_seqs, n_seqs


def _token_shift_load(ctx: GraphContext, inp: dict[str, Tensor], il: int) -> Tensor:
    """build_rwkv_token_shift_load: the layer's [n_embd, token_shift_count, n_seqs] shift state."""
    r_l, _ = ctx.w.rs(il)
    _, n_seqs = _seq_shape(ctx)
    shift = ctx.build_rs(inp, r_l, n_embd_r(ctx.model), n_seqs)
    return ctx.g.reshape(shift, ctx.n_embd, ctx.model.rwkv_hparams.token_shift_count, n_seqs)


def _token_shift_store(ctx: GraphContext, shift: Tensor, il: int) -> Tensor:
    """build_rwkv_token_shift_store: copy the new shift state into the layer's r tensor."""
    g = ctx.g
    r_l, _ = ctx.w.rs(il)
    _, n_seqs = _seq_shape(ctx)
    count = ctx.model.rwkv_hparams.token_shift_count
    dst = g.view(r_l, (n_embd_r(ctx.model) * n_seqs,), (), 0)
    return g.cpy(g.view(shift, (ctx.n_embd * n_seqs * count,), (), 0), dst)


def _store_wkv_state(ctx: GraphContext, out: Tensor, il: int) -> Tensor:
    """Split the WKV op's result: expand the copy of its state part into s, return the token rows."""
    g, n_embd = ctx.g, ctx.n_embd
    _, s_l = ctx.w.rs(il)
    _, n_seqs = _seq_shape(ctx)
    head_size = ctx.model.rwkv_hparams.head_size
    cur = g.view(out, (n_embd * ctx.n_tokens,), (), 0)
    state = g.view(out, (n_embd * head_size * n_seqs,), (), n_embd * ctx.n_tokens * F32.type_size)
    g.expand(g.cpy(state, g.view(s_l, (n_embd_s(ctx.model) * n_seqs,), (), 0)))
    return cur


def _group_norm(ctx: GraphContext, cur: Tensor, il: int) -> Tensor:
    """The per-head layer norm of the WKV output (ggml_norm over head_size groups, then ln weight and bias)."""
    g, w = ctx.g, ctx.w
    head_size = ctx.model.rwkv_hparams.head_size
    ln, ln_b = w.layer(il, "time_mix_ln.weight"), w.layer(il, "time_mix_ln.bias")
    if ln is None or ln_b is None:
        return g.reshape(cur, ctx.n_embd, ctx.n_tokens)
    cur = g.norm(g.reshape(cur, head_size, ctx.n_embd // head_size, ctx.n_tokens))
    cur = g.reshape(cur, ctx.n_embd, ctx.n_tokens)
    return g.add(g.mul(cur, ln), ln_b)


def _lerp_views(ctx: GraphContext, xxx: Tensor, count: int) -> list[Tensor]:
    """The `count` [n_embd, n_tokens] slices of a fused token-shift interpolation."""
    step = ctx.n_embd * ctx.n_tokens * F32.type_size
    return [ctx.g.view(xxx, (ctx.n_embd, ctx.n_tokens), (xxx.nb[1],), i * step) for i in range(count)]


def _rwkv6_time_mix(
    ctx: GraphContext, inp: dict[str, Tensor], cur: Tensor, x_prev: Tensor, first_value: Tensor | None, il: int
) -> tuple[Tensor, Tensor | None]:
    """llm_build_rwkv6_base::build_rwkv6_time_mix: RWKV-6's, or QRWKV's (no time_mix_first)."""
    g, w, n_embd, n_tokens = ctx.g, ctx.w, ctx.n_embd, ctx.n_tokens
    n_seq_tokens, n_seqs = _seq_shape(ctx)
    head_size = ctx.model.rwkv_hparams.head_size
    n_head = n_embd // head_size
    sx = g.reshape(g.sub(x_prev, cur), n_embd, n_tokens)
    cur = g.reshape(cur, n_embd, n_tokens)
    w1, w2 = w.layer_req(il, "time_mix_w1.weight"), w.layer_req(il, "time_mix_w2.weight")
    xxx = g.add(g.mul(sx, w.layer_req(il, "time_mix_lerp_x.weight")), cur)
    xxx = g.reshape(g.unary(g.mul_mat(w1, xxx)), w1.ne[1] // 5, 1, 5, n_tokens)
    xxx = g.cont(g.permute(xxx, 0, 1, 3, 2))
    xxx = g.mul_mat(g.reshape(w2, w2.ne[0], w2.ne[1], 1, 5), xxx)
    fused = w.layer(il, "time_mix_lerp_fused.weight")
    if fused is not None:
        sx = g.reshape(sx, n_embd, 1, n_tokens)
        cur = g.reshape(cur, n_embd, 1, n_tokens)
        xxx = g.add(g.mul(g.add(xxx, fused), sx), cur)
        xw, xk, xv, xr, xg = _lerp_views(ctx, xxx, 5)
    else:
        views = _lerp_views(ctx, xxx, 5)
        xw, xk, xv, xr, xg = (
            g.add(g.mul(g.add(x, w.layer_req(il, f"time_mix_lerp_{n}.weight")), sx), cur)
            for x, n in zip(views, "wkvrg")
        )
    r = ctx.mm(w.layer_req(il, "time_mix_receptance.weight"), xr)
    k = ctx.mm(w.layer_req(il, "time_mix_key.weight"), xk)
    v = ctx.mm(w.layer_req(il, "time_mix_value.weight"), xv)
    r, k, v = (_biased(ctx, t, il, name) for t, name in ((r, "receptance"), (k, "key"), (v, "value")))
    gate = g.unary(ctx.mm(w.layer_req(il, "time_mix_gate.weight"), xg))  # QRWKV: sigmoid, else SiLU
    n_head_kv = ctx.model.layers[il].n_head_kv
    if n_head_kv not in (0, n_head):  # QRWKV's grouped K/V heads, repeated to every head
        shape = (head_size, n_head // n_head_kv, n_head_kv, n_tokens)
        k = g.repeat(g.reshape(k, head_size, 1, n_head_kv, n_tokens), shape)
        v = g.repeat(g.reshape(v, head_size, 1, n_head_kv, n_tokens), shape)
    k, v, r = (g.reshape(t, head_size, n_head, n_tokens) for t in (k, v, r))
    decay = g.mul_mat(
        w.layer_req(il, "time_mix_decay_w2.weight"), g.unary(g.mul_mat(w.layer_req(il, "time_mix_decay_w1.weight"), xw))
    )
    decay = g.add(decay, w.layer_req(il, "time_mix_decay.weight"))
    decay = g.reshape(g.unary(g.unary(g.unary(decay))), head_size, n_head, n_tokens)
    first = w.layer(il, "time_mix_first.weight")
    if first is None:  # QRWKV: k * (1 - w), gated linear attention
        k = g.sub(k, g.mul(k, decay))
    _, s_l = w.rs(il)
    state = ctx.build_rs(inp, s_l, n_embd_s(ctx.model), n_seqs)
    if first is None:
        rows = n_tokens + head_size * state.ne[1]
        out = g.op("GATED_LINEAR_ATTN", F32, (head_size * n_head, rows), [k, v, r, decay, state])
        cur = g.reshape(_store_wkv_state(ctx, out, il), n_embd, n_tokens)
    else:
        out = g.rwkv_wkv6(k, v, r, first, decay, state)
        cur = _group_norm(ctx, _store_wkv_state(ctx, out, il), il)
    cur = ctx.mm(w.layer_req(il, "time_mix_output.weight"), g.mul(cur, gate))
    return g.reshape(cur, n_embd, n_seq_tokens, n_seqs), first_value


def _biased(ctx: GraphContext, t: Tensor, il: int, name: str) -> Tensor:
    bias = ctx.w.layer(il, f"time_mix_{name}.bias")
    return t if bias is None else ctx.g.add(t, bias)


def _rwkv6_channel_mix(ctx: GraphContext, cur: Tensor, x_prev: Tensor, il: int) -> Tensor:
    g, w = ctx.g, ctx.w
    sx = g.sub(x_prev, cur)
    xk = g.add(g.mul(sx, w.layer_req(il, "channel_mix_lerp_k.weight")), cur)
    xr = g.add(g.mul(sx, w.layer_req(il, "channel_mix_lerp_r.weight")), cur)
    r = g.unary(ctx.mm(w.layer_req(il, "channel_mix_receptance.weight"), xr))
    k = g.sqr(g.unary(ctx.mm(w.layer_req(il, "channel_mix_key.weight"), xk)))
    return g.mul(r, ctx.mm(w.layer_req(il, "channel_mix_value.weight"), k))


def _rwkv7_time_mix(
    ctx: GraphContext, inp: dict[str, Tensor], cur: Tensor, x_prev: Tensor, first_value: Tensor | None, il: int
) -> tuple[Tensor, Tensor | None]:
    """llm_build_rwkv7_base::build_rwkv7_time_mix."""
    g, w, n_embd, n_tokens = ctx.g, ctx.w, ctx.n_embd, ctx.n_tokens
    n_seq_tokens, n_seqs = _seq_shape(ctx)
    head_size = ctx.model.rwkv_hparams.head_size
    n_head = n_embd // head_size
    g1, g2 = w.layer(il, "time_mix_g1.weight"), w.layer(il, "time_mix_g2.weight")
    gating = g1 is not None and g2 is not None
    sx = g.sub(x_prev, cur)
    sx = g.repeat(sx, (n_embd, n_seq_tokens, n_seqs, 6 if gating else 5))
    xxx = g.add(g.mul(sx, w.layer_req(il, "time_mix_lerp_fused.weight")), cur)
    xr, xw, xk, xv, xa, *rest = _lerp_views(ctx, xxx, 6 if gating else 5)
    r = ctx.mm(w.layer_req(il, "time_mix_receptance.weight"), xr)
    decay = g.mul_mat(
        w.layer_req(il, "time_mix_w2.weight"), g.unary(g.mul_mat(w.layer_req(il, "time_mix_w1.weight"), xw))
    )
    decay = g.add(decay, w.layer_req(il, "time_mix_w0.weight"))
    decay = g.unary(g.scale(g.unary(decay)))
    k = ctx.mm(w.layer_req(il, "time_mix_key.weight"), xk)
    v = ctx.mm(w.layer_req(il, "time_mix_value.weight"), xv)
    if first_value is None:
        first_value = v
    else:
        mix = g.mul_mat(w.layer_req(il, "time_mix_v2.weight"), g.mul_mat(w.layer_req(il, "time_mix_v1.weight"), xv))
        mix = g.unary(g.add(mix, w.layer_req(il, "time_mix_v0.weight")))
        v = g.add(v, g.mul(g.sub(first_value, v), mix))
    gate = g.mul_mat(g2, g.unary(g.mul_mat(g1, rest[0]))) if g1 is not None and g2 is not None and rest else None
    a = g.mul_mat(w.layer_req(il, "time_mix_a2.weight"), g.mul_mat(w.layer_req(il, "time_mix_a1.weight"), xa))
    a = g.unary(g.add(a, w.layer_req(il, "time_mix_a0.weight")))
    kk = g.reshape(g.mul(k, w.layer_req(il, "time_mix_k_k.weight")), head_size, n_head, n_tokens)
    kk = g.l2_norm(kk)
    ka = g.mul(k, w.layer_req(il, "time_mix_k_a.weight"))
    k = g.add(k, g.sub(g.mul(a, ka), ka))
    r, decay, k, v, a = (g.reshape(t, head_size, n_head, n_tokens) for t in (r, decay, k, v, a))
    _, s_l = w.rs(il)
    state = ctx.build_rs(inp, s_l, n_embd_s(ctx.model), n_seqs)
    out = g.rwkv_wkv7(r, decay, k, v, g.unary(kk), g.mul(kk, a), state)
    cur = _group_norm(ctx, _store_wkv_state(ctx, out, il), il)
    r_k = g.reshape(w.layer_req(il, "time_mix_r_k.weight"), head_size, n_head)
    rk = g.sum_rows(g.mul(g.mul(k, r), r_k))
    cur = g.add(cur, g.reshape(g.mul(v, rk), n_embd, n_tokens))
    if gate is not None:
        cur = g.mul(cur, gate)
    cur = ctx.mm(w.layer_req(il, "time_mix_output.weight"), cur)
    return g.reshape(cur, n_embd, n_seq_tokens, n_seqs), first_value


def _rwkv7_channel_mix(ctx: GraphContext, cur: Tensor, x_prev: Tensor, il: int) -> Tensor:
    g, w = ctx.g, ctx.w
    sx = g.sub(x_prev, cur)
    xk = g.add(g.mul(sx, w.layer_req(il, "channel_mix_lerp_k.weight")), cur)
    k = g.sqr(g.unary(ctx.mm(w.layer_req(il, "channel_mix_key.weight"), xk)))
    return ctx.mm(w.layer_req(il, "channel_mix_value.weight"), k)


def _shifted(ctx: GraphContext, shift: Tensor, normed: Tensor) -> Tensor:
    """The previous token of every token: the stored shift, then all but the last normed token."""
    g = ctx.g
    n_seq_tokens, n_seqs = _seq_shape(ctx)
    body = g.view(normed, (ctx.n_embd, n_seq_tokens - 1, n_seqs), (normed.nb[1], normed.nb[2]), 0)
    return g.concat(shift, body, 1)


def _last_token(ctx: GraphContext, normed: Tensor) -> Tensor:
    n_seq_tokens, n_seqs = _seq_shape(ctx)
    return ctx.g.view(
        normed,
        (ctx.n_embd, 1, n_seqs),
        (normed.nb[1], normed.nb[2]),
        (n_seq_tokens - 1) * ctx.n_embd * normed.type.type_size,
    )


def _build_rwkv(ctx: GraphContext, time_mix: TimeMix, channel_mix: ChannelMix, rwkv6: bool) -> None:
    """The layer loop shared by rwkv6.cpp and rwkv7.cpp."""
    g, w, m = ctx.g, ctx.w, ctx.model
    n_embd, n_tokens = ctx.n_embd, ctx.n_tokens
    n_seq_tokens, n_seqs = _seq_shape(ctx)
    rescale = m.rwkv_hparams.rescale_every_n_layers if rwkv6 else 0
    inp_l = ctx.build_inp_embd()
    inp_l = ctx.build_norm(inp_l, w.get("token_embd_norm.weight"), w.get("token_embd_norm.bias"), rms=False, il=0)
    rs_inp = ctx.build_rs_inp()
    out_ids = ctx.build_inp_out_ids()
    first_value: Tensor | None = None
    for layer in m.trunk_layers:
        il = layer.index
        inp_l = g.reshape(inp_l, n_embd, n_seq_tokens, n_seqs)
        shift = _token_shift_load(ctx, rs_inp, il)
        att_shift = g.view(shift, (n_embd, 1, n_seqs), (shift.nb[1], shift.nb[2]), 0)
        ffn_shift = g.view(shift, (n_embd, 1, n_seqs), (shift.nb[1], shift.nb[2]), n_embd * shift.type.type_size)
        att_norm = ctx.build_norm(
            inp_l, w.layer(il, "attn_norm.weight"), w.layer(il, "attn_norm.bias"), rms=False, il=il
        )
        cur, first_value = time_mix(ctx, rs_inp, att_norm, _shifted(ctx, att_shift, att_norm), first_value, il)
        ffn_inp = g.add(cur, inp_l)
        ffn_norm = ctx.build_norm(
            ffn_inp, w.layer(il, "attn_norm_2.weight"), w.layer(il, "attn_norm_2.bias"), rms=False, il=il
        )
        x_prev = _shifted(ctx, ffn_shift, ffn_norm)
        shift = g.concat(_last_token(ctx, att_norm), _last_token(ctx, ffn_norm), 1)
        g.expand(_token_shift_store(ctx, shift, il))
        ffn_inp, ffn_norm, x_prev, cur = (g.reshape(t, n_embd, n_tokens) for t in (ffn_inp, ffn_norm, x_prev, cur))
        if il == m.n_trunk - 1:
            ffn_inp, ffn_norm, x_prev, cur = (g.get_rows(t, out_ids) for t in (ffn_inp, ffn_norm, x_prev, cur))
        cur = g.add(channel_mix(ctx, ffn_norm, x_prev, il), ffn_inp)
        if rescale and (il + 1) % rescale == 0:
            cur = g.scale(cur)
        inp_l = cur
    cur = ctx.build_norm(inp_l, w.get("output_norm.weight"), w.get("output_norm.bias"), rms=False)
    ctx.set_outputs(cur, ctx.mm(w.get("output.weight"), cur))


def _build_rwkv_with_ffn(ctx: GraphContext, time_mix: TimeMix) -> None:
    """rwkv6qwen2.cpp and arwkv7.cpp: a time mix in place of attention, then a transformer's FFN."""
    g, w, m = ctx.g, ctx.w, ctx.model
    n_embd, n_tokens = ctx.n_embd, ctx.n_tokens
    n_seq_tokens, n_seqs = _seq_shape(ctx)
    inp_l = ctx.build_inp_embd()
    rs_inp = ctx.build_rs_inp()
    out_ids = ctx.build_inp_out_ids()
    first_value: Tensor | None = None
    for layer in m.trunk_layers:
        il = layer.index
        inp_l = g.reshape(inp_l, n_embd, n_seq_tokens, n_seqs)
        shift = _token_shift_load(ctx, rs_inp, il)
        att_norm = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), w.layer(il, "attn_norm.bias"), il=il)
        cur, first_value = time_mix(ctx, rs_inp, att_norm, _shifted(ctx, shift, att_norm), first_value, il)
        g.expand(_token_shift_store(ctx, _last_token(ctx, att_norm), il))
        ffn_inp = g.reshape(g.add(cur, inp_l), n_embd, n_tokens)
        if il == m.n_trunk - 1:
            ffn_inp = g.get_rows(ffn_inp, out_ids)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        inp_l = g.add(ctx.build_layer_ffn(cur, il), ffn_inp)
    cur = ctx.build_norm(inp_l, w.get("output_norm.weight"), w.get_optional("output_norm.bias"))
    ctx.set_outputs(cur, ctx.mm(w.get("output.weight"), cur))


def build_rwkv6(ctx: GraphContext) -> None:
    _build_rwkv(ctx, _rwkv6_time_mix, _rwkv6_channel_mix, rwkv6=True)


def build_rwkv7(ctx: GraphContext) -> None:
    _build_rwkv(ctx, _rwkv7_time_mix, _rwkv7_channel_mix, rwkv6=False)


read_hparams = _rwkv


def build_graph(ctx: GraphContext) -> None:
    arch = ctx.model.architecture
    if arch in _WITH_FFN:
        _build_rwkv_with_ffn(ctx, _rwkv6_time_mix if arch == "rwkv6qwen2" else _rwkv7_time_mix)
        return
    (build_rwkv6 if arch == "rwkv6" else build_rwkv7)(ctx)
