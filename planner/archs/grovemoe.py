"""GroveMoE (src/models/grovemoe.cpp): Qwen3-MoE's attention (per-head Q/K norms before RoPE), then two
expert passes routed by the same logits: the experts, and on their output the groups' small "chunk"
experts (one per group of experts, picked through the group of each picked expert), added at the
group scale.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import read_experts, require
from planner.errors import GGUFError
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _grovemoe(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_grovemoe::load_arch_hparams: the experts' FFN length, the group scale, the experts per
    # group and the RMS epsilon are required; load_arch_tensors asserts experts, used experts and groups
    require(
        anatomy,
        meta,
        "expert_feed_forward_length",
        "expert_group_scale",
        "experts_per_group",
        "attention.layer_norm_rms_epsilon",
    )
    read_experts(anatomy, meta)
    if anatomy.experts is None or anatomy.experts.n_used == 0 or meta.int_or("experts_per_group", 0) <= 0:
        problem = "grovemoe: n_expert, n_expert_used and experts_per_group must be > 0 (llama.cpp aborts)"
        raise GGUFError(anatomy.path, problem)
    experts = anatomy.experts
    experts.weights_scale = 0.0  # not read by this loader: no scale node
    experts.n_per_chunk = meta.int_or("experts_per_group", 0)
    n_chunk = experts.n_expert // experts.n_per_chunk
    if experts.n_used > n_chunk:  # build_moe_ffn sums n_expert_used views of the chunk experts' fewer picks
        problem = (
            f"grovemoe: {experts.n_used} experts used but only {n_chunk} chunk experts "
            "(expert_count / experts_per_group): llama.cpp aborts building the graph"
        )
        raise GGUFError(anatomy.path, problem)


def build_grovemoe(ctx: GraphContext) -> None:
    """llama_model_grovemoe::graph: attn_norm, QKV, Q's norm and RoPE, K's norm and RoPE, attention,
    residual; ffn_norm, the router's logits, the experts, then the chunk experts on their output,
    scaled and added; residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    experts = m.moe
    n_chunk = experts.n_expert // experts.n_per_chunk
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = g.rope(ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il), inp_pos)
        k = g.rope(ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il), inp_pos)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        logits = ctx.mm(w.layer_req(il, "ffn_gate_inp.weight"), cur)
        n = experts.n_expert
        cur = ctx.build_moe_ffn(cur, il, n, experts.n_used, logits=logits, grouped_from=n)
        chunk = ctx.build_moe_ffn(
            cur, il, n_chunk, min(experts.n_used, n_chunk), logits=logits, grouped_from=n, stem="chexps"
        )
        cur = g.add(cur, g.scale(chunk))
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _grovemoe
build_graph = build_grovemoe
