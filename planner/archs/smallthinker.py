"""SmallThinker (src/models/smallthinker.cpp): the router reads each layer's input before its attention
norm; ReLU-gated experts only, no shared expert. With a sliding window in the header, 3 of every 4
layers attend within a 4,096-token window (the first of each four is global) and only those use RoPE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import load_swa_pattern, read_experts, require
from planner.errors import GGUFError
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.hparams import GATING_NAMES
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _smallthinker(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_smallthinker::load_arch_hparams: any window in the header becomes 4,096 tokens on
    # the layers of a 4-layer pattern whose first is global (the header's pattern wins), and the global
    # layers go without RoPE (n_no_rope_layer_step keeps its default of 4); without one, RoPE everywhere
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    if meta.int_or("attention.sliding_window", 0) > 0:
        anatomy.swa_type = SWA_STANDARD
        anatomy.n_swa = 4096
        load_swa_pattern(anatomy, meta, 4, dense_first=True)
        anatomy.n_no_rope_layer_step = 4
    read_experts(anatomy, meta)
    experts = anatomy.experts
    if experts is None or experts.n_used == 0:  # load_arch_tensors asserts
        raise GGUFError(anatomy.path, "smallthinker: n_expert and n_expert_used must be > 0 (llama.cpp aborts)")
    if experts.gating_func not in GATING_NAMES:  # 0 (none) makes build_moe_ffn abort
        problem = f"expert_gating_func {experts.gating_func} is unknown: llama.cpp aborts building the graph"
        raise GGUFError(anatomy.path, problem)
    experts.weights_scale = 0.0  # not read by this loader: no scale node


def build_smallthinker(ctx: GraphContext) -> None:
    """llama_model_smallthinker::graph: the router's logits from the layer input; attn_norm, QKV, RoPE
    (not on the global layers of a windowed model), attention, residual; ffn_norm, ReLU-gated experts
    weighted by the early logits, residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    experts = m.moe
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    iswa = m.has_swa
    inp_full, inp_swa = attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    step = m.n_no_rope_layer_step
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        logits = ctx.mm(w.layer_req(il, "ffn_gate_inp.weight"), inp_l)
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        if not step or il % step != 0:
            q = g.rope(q, inp_pos)
            k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=iswa)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
            logits = g.get_rows(logits, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_moe_ffn(
            cur, il, experts.n_expert, experts.n_used, "relu", True, 0.0, experts.gating, logits=logits
        )
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _smallthinker
build_graph = build_smallthinker
