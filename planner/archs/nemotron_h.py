"""Nemotron-H and Nemotron-H MoE (src/models/nemotron-h.cpp): each layer is Mamba-2, attention or a
feed-forward block alone (routed ReLU² experts in the MoE variant).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_experts,
    read_ssm,
)
from planner.archs.mamba import mamba2_layer
from planner.ggml_graph import FLAG_OUTPUT, Tensor
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _nemotron_h(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Each layer is Mamba-2 (no KV heads, no FFN), attention (no FFN) or a feed-forward block alone
    (routed experts in nemotron_h_moe, whose top-k may differ per layer)."""
    read_experts(anatomy, meta)
    read_ssm(anatomy, meta)
    experts = anatomy.experts
    if experts is not None:
        experts.n_used_per_layer = meta.per_layer("expert_used_count", anatomy.n_layer, experts.n_used)
        experts.n_groups = meta.int_or("expert_group_count", 0)
        experts.n_group_used = meta.int_or("expert_group_used_count", 0)
    for layer in anatomy.layers:
        layer.is_recurrent = layer.n_head_kv == 0 and layer.n_ff == 0
        layer.has_kv = not layer.is_recurrent and layer.n_ff == 0 and not layer.is_mtp


def _nemotron_h_moe(ctx: GraphContext, cur: Tensor, il: int) -> Tensor:
    """Sigmoid-routed ReLU² experts, optionally in a smaller latent space, plus a shared expert."""
    g, w, experts = ctx.g, ctx.w, ctx.model.moe
    latent_down, latent_up = w.layer(il, "ffn_latent_down.weight"), w.layer(il, "ffn_latent_up.weight")
    inp_latent = g.mul_mat(latent_down, cur) if latent_down is not None else cur
    logits = ctx.mm(w.layer_req(il, "ffn_gate_inp.weight"), cur)
    moe = ctx.build_moe_ffn(
        inp_latent,
        il,
        experts.n_expert,
        experts.n_used_per_layer[il],
        "relu_sqr",
        experts.weights_norm,
        experts.weights_scale,
        "sigmoid",
        exp_probs_b=w.layer(il, "exp_probs_b.bias"),
        n_expert_groups=experts.n_groups,
        n_group_used=experts.n_group_used,
        logits=logits,
    )
    if latent_up is not None:
        moe = g.mul_mat(latent_up, moe)
    shared = ctx.build_ffn(
        cur, w.layer(il, "ffn_up_shexp.weight"), None, w.layer(il, "ffn_down_shexp.weight"), "relu_sqr", True
    )
    return g.add(moe, shared)


def build_nemotron_h(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    g.expand(inp_l)
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        if layer.is_recurrent:
            cur = mamba2_layer(ctx, rs_inp, cur, il)
        elif layer.n_ff == 0:
            cur = ctx.build_plain_attn(inp_attn, layer, cur, None, w.layer(il, "attn_output.bias"))
        elif w.layer(il, "ffn_gate_inp.weight") is None:
            cur = ctx.build_ffn(
                cur,
                w.layer(il, "ffn_up.weight"),
                None,
                w.layer(il, "ffn_down.weight"),
                "relu_sqr",
                True,
                up_b=w.layer(il, "ffn_up.bias"),
                down_b=w.layer(il, "ffn_down.bias"),
            )
        else:
            cur = _nemotron_h_moe(ctx, cur, il)
        # embeddings_nextn_masked is off by default: the rows are picked after the output norm
        inp_l = g.add(cur, inp_l)
    h_nextn = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    h_nextn.flags |= FLAG_OUTPUT  # res->t_h_nextn, marked as an output by set_outputs
    cur = g.get_rows(h_nextn, out_ids)
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur, w.get_optional("output.scale")))


read_hparams = _nemotron_h
build_graph = build_nemotron_h
