"""Granite with a sliding window (src/models/granite-swa.cpp): Granite's scales and layers, a window on
the layers an explicit per-layer array names, attention sinks, RoPE only where the optional per-layer
rope pattern says, an optional deepstack mapping (slices of a wider input added before some layers),
and routed experts whose shared expert is one fused SwiGLU projection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.archs.granite import granite_output, granite_scales
from planner.errors import GGUFError
from planner.ggml_graph import Tensor
from planner.graphs.blocks import attention_inputs
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _int_list(value: object) -> list[int]:
    return [int(v) for v in value] if isinstance(value, list) else []


def _granite_swa(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_granite_swa::load_arch_hparams: the RMS epsilon, the logit scale, the window and the
    # per-layer window array are required; the deepstack mapping and the rope pattern are optional arrays
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "logit_scale", "attention.sliding_window")
    pattern = meta.get("attention.sliding_window_pattern")
    if not isinstance(pattern, list):
        key = f"{anatomy.architecture}.attention.sliding_window_pattern"
        raise GGUFError(anatomy.path, f"array key not found in model: {key} (llama.cpp refuses the model)")
    granite_scales(anatomy, meta)
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 0)
    for layer in anatomy.layers:
        layer.is_swa = layer.index < len(pattern) and bool(pattern[layer.index])
    mapping = set(v for v in _int_list(meta.get("deepstack_mapping")) if v >= 0)
    for v in mapping:
        if v > len(mapping):
            raise GGUFError(anatomy.path, f"Invalid deepstack index: {v} > {len(mapping)} (llama.cpp refuses it)")
    anatomy.n_deepstack = len(mapping)
    anatomy.n_embd_inp = anatomy.n_embd * (1 + len(mapping))


def _deepstack_index(ctx: GraphContext, il: int) -> int:
    mapping = _int_list(ctx.model.metadata.get(f"{ctx.model.architecture}.deepstack_mapping"))
    return mapping[il] if il < len(mapping) else -1


def _has_rope(ctx: GraphContext, il: int) -> bool:
    pattern = _int_list(ctx.model.metadata.get(f"{ctx.model.architecture}.attention.rope_pattern"))
    return pattern[il] != 0 if il < len(pattern) else True


def _ffn(ctx: GraphContext, cur: Tensor, inp_sa: Tensor, il: int) -> Tensor:
    """build_layer_ffn: the residual-scaled attention output; a dense FFN (biases optional) or softmax-routed
    experts plus the fused SwiGLU shared expert; scaled again; residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    if m.granite_scales.residual:
        cur = g.scale(cur)
    ffn_inp = g.add(cur, inp_sa)
    cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
    if w.layer(il, "ffn_gate_inp.weight") is None:
        cur = ctx.build_ffn(
            cur,
            w.layer(il, "ffn_up.weight"),
            w.layer(il, "ffn_gate.weight"),
            w.layer(il, "ffn_down.weight"),
            up_b=w.layer(il, "ffn_up.bias"),
            gate_b=w.layer(il, "ffn_gate.bias"),
            down_b=w.layer(il, "ffn_down.bias"),
        )
    else:
        moe = ctx.build_moe_ffn(cur, il, m.moe.n_expert, m.moe.n_used, "silu", True, m.moe.weights_scale)
        up_shexp = w.layer(il, "ffn_up_shexp.weight")
        if up_shexp is not None:
            shared = ctx.build_ffn(cur, up_shexp, None, w.layer(il, "ffn_down_shexp.weight"), "swiglu", False)
            moe = g.add(moe, shared)
        cur = moe
    if m.granite_scales.residual:
        cur = g.scale(cur)
    return g.add(cur, ffn_inp)


def build_granite_swa(ctx: GraphContext) -> None:
    """llama_model_granite_swa::graph: the mapped deepstack slice added to the layer's input; attn_norm,
    QKV, RoPE where the pattern says, attention with sinks (windowed or full cache), residual (scaled);
    ffn_norm, the FFN, residual; output norm, LM head and 1/logit_scale."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    src = ctx.inp_embd
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        ds = _deepstack_index(ctx, il)
        if il > 0 and ds >= 0:
            inp_l = g.add(inp_l, g.view(src, (m.n_embd, ctx.n_tokens), (src.nb[1],), ds * m.n_embd * 4))
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        if _has_rope(ctx, il):
            q = g.rope(q, inp_pos, w.rope_freqs(il))
            k = g.rope(k, inp_pos, w.rope_freqs(il))
        inp = inp_swa if layer.is_swa else inp_full
        wo, wo_b, sinks = (w.layer(il, n) for n in ("attn_output.weight", "attn_output.bias", "attn_sinks.weight"))
        cur = ctx.build_attn(inp, layer, wo, wo_b, q, k, v, sinks=sinks, iswa=True)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        inp_l = _ffn(ctx, cur, inp_sa, il)
    granite_output(ctx, inp_l, logit_scale=True)


read_hparams = _granite_swa
build_graph = build_granite_swa
