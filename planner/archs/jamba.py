"""Jamba (src/models/jamba.cpp): Mamba-1 layers where a layer has no KV heads, attention without RoPE
elsewhere; dense or routed FFN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    read_experts,
    read_ssm,
    recurrent_where_no_kv_heads,
)
from planner.archs.mamba import mamba_layer
from planner.errors import GGUFError
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _jamba(anatomy: ModelAnatomy, meta: Meta) -> None:
    """Mamba-1 layers where a layer has no KV heads, attention elsewhere; experts on some layers."""
    read_experts(anatomy, meta)
    read_ssm(anatomy, meta)
    d_inner = anatomy.state_space.d_inner
    if d_inner != 2 * anatomy.n_embd:  # GGML_ASSERT in llama.cpp: the process aborts
        raise GGUFError(
            anatomy.path,
            f"jamba: ssm inner size {d_inner} is not twice the "
            f"embedding length {anatomy.n_embd}, which llama.cpp requires",
        )
    recurrent_where_no_kv_heads(anatomy)


def build_jamba(ctx: GraphContext) -> None:
    """Jamba: Mamba-1 layers and attention layers without RoPE; dense or routed feed-forward."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    rs_inp = ctx.build_rs_inp()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        if layer.is_recurrent:
            cur = mamba_layer(ctx, rs_inp, cur, il)
        else:
            cur = ctx.build_plain_attn(inp_attn, layer, cur, None)  # jamba's attention has no RoPE
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        ffn_inp = g.add(inp_l, cur)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is None:
            cur = ctx.build_layer_ffn(cur, il)
        else:
            cur = ctx.build_moe_ffn(cur, il, m.moe.n_expert, m.moe.n_used, "silu", False, m.moe.weights_scale)
        inp_l = g.add(ffn_inp, cur)
    cur = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur, w.get_optional("output.scale")))


read_hparams = _jamba
build_graph = build_jamba
