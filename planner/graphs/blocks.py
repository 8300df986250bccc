"""Graph pieces the dense families share: the attention inputs and the output layer."""

from __future__ import annotations

from planner.ggml_graph import Tensor
from planner.graphs.context import GraphContext


def final_output(
    ctx: GraphContext, cur: Tensor, softcap: bool = False, output_bias: bool = False, rms: bool = True
) -> None:
    g, w = ctx.g, ctx.w
    cur = ctx.build_norm(cur, w.get_optional("output_norm.weight"), w.get_optional("output_norm.bias"), rms=rms)
    embd = cur
    cur = ctx.mm(ctx.output_weight(), cur, w.get_optional("output.scale"))
    if output_bias and w.get_optional("output.bias") is not None:  # qwen2, phi2
        cur = g.add(cur, w.get("output.bias"))
    if softcap:
        cur = g.scale(cur)
        cur = g.unary(cur)
        cur = g.scale(cur)
    ctx.set_outputs(embd, cur)


def attention_inputs(ctx: GraphContext, iswa: bool) -> tuple[dict[str, Tensor | None], dict[str, Tensor | None]]:
    """The KV inputs of full and windowed layers (build_attn_inp_kv_iswa), or one for every layer."""
    if iswa:
        return ctx.build_attn_inp_kv(swa=False), ctx.build_attn_inp_kv(swa=True)
    inp = ctx.build_attn_inp_kv()
    return inp, inp
