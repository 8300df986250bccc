"""GLM-4 dense (src/models/glm4.cpp): pre- and post-norms around both attention and FFN, a fused
gate/up FFN, multi-section RoPE when the header gives sections; multi-token-prediction layers skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require, use_multi_section_rope
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _glm4(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_glm4::load_arch_hparams: the RMS epsilon is required; rope.dimension_sections is
    # optional, and with its first two sections set (use_mrope) positions are four per token
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    use_multi_section_rope(anatomy, meta)


def build_glm4(ctx: GraphContext) -> None:
    """llama_model_glm4::graph: attn_norm, QKV, RoPE, attention, post-attention norm, residual;
    ffn_norm, SwiGLU on the fused up projection, post-FFN norm, residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
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
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        cur = ctx.build_norm(cur, w.layer(il, "post_attention_norm.weight"), il=il)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_ffn(cur, w.layer(il, "ffn_up.weight"), None, w.layer(il, "ffn_down.weight"), "swiglu", False)
        cur = ctx.build_norm(cur, w.layer(il, "post_ffw_norm.weight"), il=il)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _glm4
build_graph = build_glm4
