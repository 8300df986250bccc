"""MiMo-V2 (src/models/mimo2.cpp): a sliding window on the layers an explicit per-layer array names,
per-layer head counts, optional attention sinks, an optional value scale on the attention's output,
and a dense FFN or sigmoid-routed experts per layer (with an optional selection bias); the
multi-token-prediction layers are skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import read_experts, require, require_output
from planner.errors import GGUFError
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _value_scale(model: ModelAnatomy) -> float:
    """f_attn_value_scale: attention.value_scale when it is set and not 1 (no scale node otherwise)."""
    value = model.metadata.get(f"{model.architecture}.attention.value_scale")
    return float(value) if isinstance(value, (int, float)) and value not in (0, 1) else 0.0


def _mimo2(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_mimo2::load_arch_hparams: the RMS epsilon, the experts' FFN length, the window and the
    # per-layer window array are required; the output matrix is never tied
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "expert_feed_forward_length", "attention.sliding_window")
    pattern = meta.get("attention.sliding_window_pattern")
    if not isinstance(pattern, list):
        key = f"{anatomy.architecture}.attention.sliding_window_pattern"
        raise GGUFError(anatomy.path, f"array key not found in model: {key} (llama.cpp refuses the model)")
    require_output(anatomy)
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 0)
    for layer in anatomy.layers:
        layer.is_swa = layer.index < len(pattern) and bool(pattern[layer.index])
    read_experts(anatomy, meta)
    if anatomy.experts is not None:
        anatomy.experts.weights_scale = 0.0  # not read by this loader: no scale node


def build_mimo2(ctx: GraphContext) -> None:
    """llama_model_mimo2::graph: attn_norm, QKV (fused or not) with the layer's heads, RoPE, attention with
    sinks (windowed or full cache), the value scale, residual; ffn_norm, SwiGLU or experts, residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    v_scale = _value_scale(m)
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        q, k, v = ctx.build_qkv(layer, cur, layer.head_dim_k, layer.n_head, layer.head_dim_k, layer.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        wo, sinks = w.layer(il, "attn_output.weight"), w.layer(il, "attn_sinks.weight")
        cur = ctx.build_attn(inp, layer, wo, None, q, k, v, sinks=sinks, iswa=True)
        if v_scale:
            cur = g.scale(cur)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is None:
            cur = ctx.build_layer_ffn(cur, il)
        else:
            experts = m.moe
            cur = ctx.build_moe_ffn(
                cur,
                il,
                experts.n_expert,
                experts.n_used,
                "silu",
                True,
                0.0,
                "sigmoid",
                exp_probs_b=w.layer(il, "exp_probs_b.bias"),
            )
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _mimo2
build_graph = build_mimo2
