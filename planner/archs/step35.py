"""Step 3.5 (src/models/step35.cpp): a sliding window on the layers an explicit per-layer array names,
per-layer head counts, optional per-head Q/K norms before RoPE, an optional sigmoid gate per head (from
the attention's input) before the output projection, and a dense FFN or routed experts (sigmoid by
default, optional selection bias) plus a shared expert per layer, with per-layer SwiGLU limits; every
token reaches the last layer's output (the multi-token-prediction input), the output rows are picked
before the output norm; multi-token-prediction layers skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import MTP_FFN_AND_HEADS, read_experts, read_swiglu_clamps, require, require_output
from planner.errors import GGUFError
from planner.ggml_graph import FLAG_OUTPUT
from planner.graphs.blocks import attention_inputs
from planner.graphs.context import GraphContext
from planner.hparams import GATING_SIGMOID
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _step35(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_step35::load_arch_hparams: the RMS epsilon, the experts' FFN length, the window and the
    # per-layer window array are required; no gating function means sigmoid; the output is never tied
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "expert_feed_forward_length", "attention.sliding_window")
    pattern = meta.get("attention.sliding_window_pattern")
    if not isinstance(pattern, list):
        key = f"{anatomy.architecture}.attention.sliding_window_pattern"
        raise GGUFError(anatomy.path, f"array key not found in model: {key} (llama.cpp refuses the model)")
    require_output(anatomy)
    # and its query/key norms and attention gate, also created TENSOR_NOT_REQUIRED alone
    anatomy.mtp_loaded = (*MTP_FFN_AND_HEADS, "attn_q_norm.", "attn_k_norm.", "attn_gate.")
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 0)
    for layer in anatomy.layers:
        layer.is_swa = layer.index < len(pattern) and bool(pattern[layer.index])
    read_swiglu_clamps(anatomy, meta)
    read_experts(anatomy, meta)
    if anatomy.experts is not None:
        anatomy.experts.gating_func = anatomy.experts.gating_func or GATING_SIGMOID


def build_step35(ctx: GraphContext) -> None:
    """llama_model_step35::graph: attn_norm, Q/K/V with the layer's heads, Q's and K's norms, RoPE,
    attention (windowed or full cache) without its projection, times the sigmoid head gate, the
    projection, residual; ffn_norm, SwiGLU or experts plus the shared expert, residual; the last output
    (a graph output), its output rows, the output norm and LM head."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    out_ids = ctx.build_inp_out_ids()
    n_tok = ctx.n_tokens
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hk, hv, n_head, n_kv = layer.head_dim_k, layer.head_dim_v, layer.n_head, layer.n_head_kv
        q, k, v = ctx.build_qkv(layer, cur, hk, n_head, hk, n_kv, hv, reshape=False)
        q, k, v = g.reshape(q, hk, n_head, n_tok), g.reshape(k, hk, n_kv, n_tok), g.reshape(v, hv, n_kv, n_tok)
        q_norm, k_norm = w.layer(il, "attn_q_norm.weight"), w.layer(il, "attn_k_norm.weight")
        if q_norm is not None:
            q = ctx.build_norm(q, q_norm, il=il)
        if k_norm is not None:
            k = ctx.build_norm(k, k_norm, il=il)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        attn = ctx.build_attn(inp, layer, None, None, q, k, v, iswa=True)
        gate_w = w.layer(il, "attn_gate.weight")
        if gate_w is not None:
            gate = g.unary(ctx.mm(gate_w, cur))
            attn = g.mul(g.reshape(attn, hv, n_head, n_tok), g.reshape(gate, 1, n_head, n_tok))
            attn = g.reshape(attn, hv * n_head, n_tok)
        cur = ctx.mm(w.layer_req(il, "attn_output.weight"), attn)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is None:
            cur = ctx.build_layer_ffn(cur, il)
        else:
            cur = ctx.build_routed_experts(cur, il, m.moe, shared=True)
        inp_l = g.add(cur, ffn_inp)
    inp_l.flags |= FLAG_OUTPUT  # t_h_nextn, the multi-token-prediction head's input, is a graph output
    cur = ctx.build_norm(g.get_rows(inp_l, out_ids), w.get_optional("output_norm.weight"))
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur))


read_hparams = _step35
build_graph = build_step35
