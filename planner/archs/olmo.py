"""OLMo 1 (src/models/olmo.cpp): layer norms without weights or biases, Q/K/V clamped to the header's
attention.clamp_kqv when it is set, RoPE on the whole head, a gated SiLU FFN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _olmo(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_olmo::load_arch_hparams: the norm epsilon is required, the clamp optional
    require(anatomy, meta, "attention.layer_norm_epsilon")
    anatomy.f_clamp_kqv = meta.float_or("attention.clamp_kqv", 0.0)


def build_olmo(ctx: GraphContext) -> None:
    """llama_model_olmo::graph: a plain layer norm, QKV (clamped in build_qkv), RoPE, attention,
    residual; a plain layer norm, SiLU-gated FFN, residual; a plain layer norm before the output."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, None, rms=False, il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, None, rms=False, il=il)
        cur = ctx.build_layer_ffn(cur, il)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l, rms=False)


read_hparams = _olmo
build_graph = build_olmo
