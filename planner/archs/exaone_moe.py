"""EXAONE MoE (src/models/exaone-moe.cpp): 3 of every 4 layers attend within a window and only those
use RoPE; per-head Q/K norms; routed experts plus an always-on shared expert after the leading dense
layers; multi-token-prediction layers loaded by name and skipped.
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


def _exaone_moe(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_exaone_moe::load_arch_hparams: a standard window on 3 of every 4 layers (the header's
    # pattern wins), its size required; the RMS epsilon, the experts' FFN length and the gating function
    # required; the output matrix is never tied
    require(
        anatomy,
        meta,
        "attention.sliding_window",
        "attention.layer_norm_rms_epsilon",
        "expert_feed_forward_length",
        "expert_gating_func",
    )
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 128)
    load_swa_pattern(anatomy, meta, 4)
    read_experts(anatomy, meta)
    n_dense_lead = meta.int_or("leading_dense_block_count", 0)
    if anatomy.experts is not None:
        anatomy.experts.n_layer_dense_lead = n_dense_lead
    n_moe_layers = sum(1 for layer in anatomy.layers if not layer.is_mtp and layer.index >= n_dense_lead)
    if n_moe_layers:  # llama_model_exaone_moe::load_arch_tensors
        if anatomy.experts is None:
            raise GGUFError(anatomy.path, "n_expert must be > 0 (llama.cpp refuses the model)")
        if anatomy.experts.n_used == 0:
            raise GGUFError(anatomy.path, "n_expert_used must be > 0 (llama.cpp refuses the model, or aborts its load)")
        if anatomy.experts.gating_func not in GATING_NAMES:  # 0 (none) makes build_moe_ffn abort
            problem = (
                f"expert_gating_func {anatomy.experts.gating_func} is unknown: llama.cpp aborts building the graph"
            )
            raise GGUFError(anatomy.path, problem)
    if not any(t.name == "output.weight" for t in anatomy.output_tensors):
        raise GGUFError(
            anatomy.path, "missing tensor 'output.weight' (llama.cpp refuses an EXAONE MoE model without it)"
        )


def build_exaone_moe(ctx: GraphContext) -> None:
    """llama_model_exaone_moe::graph: attn_norm, QKV, Q's and K's norms, RoPE on the windowed layers
    only, attention (windowed or full cache), residual; ffn_norm, then a SiLU-gated FFN or routed
    experts plus the shared expert, residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full, inp_swa = attention_inputs(ctx, True)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        if layer.is_swa:
            freqs = w.rope_freqs(il)
            q = g.rope(q, inp_pos, freqs)
            k = g.rope(k, inp_pos, freqs)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=True)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is None:
            cur = ctx.build_layer_ffn(cur, il)
        else:
            moe = m.moe
            routed = ctx.build_moe_ffn(
                cur,
                il,
                moe.n_expert,
                moe.n_used,
                "silu",
                moe.weights_norm,
                moe.weights_scale,
                moe.gating,
                exp_probs_b=w.layer(il, "exp_probs_b.bias"),
            )
            shared = ctx.build_shared_expert(cur, il)
            cur = g.add(routed, shared)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _exaone_moe
build_graph = build_exaone_moe
