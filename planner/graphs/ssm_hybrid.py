"""Hybrids of attention and state-space layers (src/models/{falcon-h1,nemotron-h}.cpp).

Falcon-H1 runs attention and a Mamba-2 mixer side by side in every layer;
Nemotron-H gives each layer one job: a Mamba-2 mixer, attention or a feed-forward block.
"""

from __future__ import annotations

from planner.ggml_graph import FLAG_OUTPUT, Tensor
from planner.graphs.context import GraphContext
from planner.graphs.mamba import mamba2_layer
from planner.model import LayerAnatomy


def _attention(ctx: GraphContext, inp: dict[str, Tensor | None], layer: LayerAnatomy, cur: Tensor,
               pos: Tensor | None, wo_b: Tensor | None) -> Tensor:
    """build_qkv, RoPE when the model has positions, build_attn."""
    g, w = ctx.g, ctx.w
    hd = layer.head_dim_k
    q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
    if pos is not None:
        q = g.rope(q, pos)
        k = g.rope(k, pos)
    return ctx.build_attn(inp, layer, w.layer(layer.index, "attn_output.weight"), wo_b, q, k, v)


def build_falcon_h1(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        attn_out = _attention(ctx, inp_attn, layer, cur, inp_pos, None)  # llama.cpp passes no output bias
        # the mixer normalizes the layer input again, on its own
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        ssm_out = mamba2_layer(ctx, rs_inp, cur, il)
        inp_sa = g.add(g.add(attn_out, ssm_out), inp_l)
        if il == m.n_trunk - 1:
            inp_sa = g.get_rows(inp_sa, out_ids)  # the layer output's get_rows is never used
        cur = ctx.build_norm(inp_sa, w.layer(il, "ffn_norm"), il=il)
        cur = ctx.build_ffn(cur, w.layer(il, "ffn_up.weight"), w.layer(il, "ffn_gate.weight"),
                            w.layer(il, "ffn_down.weight"), "silu", True, up_b=w.layer(il, "ffn_up.bias"),
                            gate_b=w.layer(il, "ffn_gate.bias"), down_b=w.layer(il, "ffn_down.bias"))
        inp_l = g.add(cur, inp_sa)
    cur = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur, w.get_optional("output.scale")))


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
            cur = _attention(ctx, inp_attn, layer, cur, None, w.layer(il, "attn_output.bias"))
        else:
            cur = ctx.build_ffn(cur, w.layer(il, "ffn_up.weight"), None, w.layer(il, "ffn_down.weight"), "relu_sqr",
                                True, up_b=w.layer(il, "ffn_up.bias"), down_b=w.layer(il, "ffn_down.bias"))
        # embeddings_nextn_masked is off by default: the rows are picked after the output norm
        inp_l = g.add(cur, inp_l)
    h_nextn = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    h_nextn.flags |= FLAG_OUTPUT  # res->t_h_nextn, marked as an output by set_outputs
    cur = g.get_rows(h_nextn, out_ids)
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur, w.get_optional("output.scale")))
