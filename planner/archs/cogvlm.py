"""CogVLM's language model (src/models/cogvlm.cpp): llama's layers with a fused QKV, and a second
("visual expert") set of attention and FFN weights the graph takes instead for image embeddings (same
shapes, so the same compute buffer); every token stays to the end (no output-row selection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _cogvlm(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_cogvlm::load_arch_hparams: the RMS epsilon is required
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")


def build_cogvlm(ctx: GraphContext) -> None:
    """llama_model_cogvlm::graph: attn_norm, the fused QKV split into views, RoPE on Q and K, attention,
    residual; ffn_norm, SwiGLU, residual; the output over every token of the micro-batch."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        qkv = ctx.mm(w.layer_req(il, "attn_qkv.weight"), cur)
        es, n_tok = qkv.type.type_size, ctx.n_tokens
        q = g.view(qkv, (hd, layer.n_head, n_tok), (es * hd, qkv.nb[1]), 0)
        k = g.view(qkv, (hd, layer.n_head_kv, n_tok), (es * hd, qkv.nb[1]), es * m.n_embd)
        v = g.view(qkv, (hd, layer.n_head_kv, n_tok), (es * hd, qkv.nb[1]), 2 * es * m.n_embd)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        inp_l = g.add(ctx.build_layer_ffn(cur, il), ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _cogvlm
build_graph = build_cogvlm
