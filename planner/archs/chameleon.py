"""Chameleon (src/models/chameleon.cpp): llama's layers with LayerNorm Q/K norms (per head, optional
biases) before RoPE, or with Swin-style norms after attention and FFN (swin_norm); the image tokens'
logits forced down by a set over the logits, from an 8,192-wide tensor the graph allocates itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.errors import ModelError
from planner.ggml_graph import F32
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy

# llama_model_chameleon::graph: image token ids 4 to 8,196 get their logits set
_N_IMAGE_TOKENS = 8196 - 4


def _chameleon(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_chameleon::load_arch_hparams: the RMS epsilon is required, swin_norm optional
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    if anatomy.n_vocab < _N_IMAGE_TOKENS:  # ggml_set_1d: one token's logits must hold the image tokens'
        problem = (
            f"chameleon with {anatomy.n_vocab} tokens, fewer than its {_N_IMAGE_TOKENS} image tokens: "
            "llama.cpp aborts building the graph"
        )
        raise ModelError(anatomy.path, problem)


def build_chameleon(ctx: GraphContext) -> None:
    """llama_model_chameleon::graph: attn_norm (after attention with swin_norm), QKV, Q's and K's
    LayerNorms, RoPE, attention, residual; ffn_norm (after the FFN with swin_norm), SwiGLU, residual;
    output norm and matrix, then the image tokens' logits set from a clamped tensor."""
    g, w, m = ctx.g, ctx.w, ctx.model
    swin = bool(m.metadata.get(f"{m.architecture}.swin_norm", False))
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = inp_l if swin else ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), w.layer(il, "attn_q_norm.bias"), rms=False, il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), w.layer(il, "attn_k_norm.bias"), rms=False, il=il)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        if swin:
            cur = ctx.build_norm(cur, w.layer(il, "attn_norm.weight"), il=il)
        ffn_inp = g.add(cur, inp_sa)
        if not swin:
            cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        cur = ctx.build_layer_ffn(cur, il)
        if swin:
            cur = ctx.build_norm(cur, w.layer(il, "ffn_norm.weight"), il=il)
        inp_l = g.add(cur, ffn_inp)
    cur = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    embd = cur
    cur = ctx.mm(ctx.output_weight(), cur)
    image_logits = g.clamp(g.new_tensor(F32, (_N_IMAGE_TOKENS,)))
    cur = g.op("SET", cur.type, cur.ne, [cur, image_logits])
    ctx.set_outputs(embd, cur)


read_hparams = _chameleon
build_graph = build_chameleon
