"""Apertus (src/models/apertus.cpp): llama's attention with per-head Q/K norms before RoPE (their biases,
when the file has them, loaded but not added), an FFN without a gate activated by xIELU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.errors import GGUFError
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy

_XIELU = ("xielu.alpha_n", "xielu.alpha_p", "xielu.beta", "xielu.eps")


def _apertus(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_apertus::load_arch_hparams: the RMS epsilon and the four xIELU parameters are
    # required, each one number or an array of one per layer; their keys carry no architecture
    # prefix (llama-arch.cpp: "xielu.alpha_n" ...). The output matrix is not tied.
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    for key in _XIELU:
        value = meta.md.get(key)
        if value is None:
            raise GGUFError(anatomy.path, f"key not found in model: {key} (llama.cpp refuses the model)")
        if not isinstance(value, (int, float)) and len(value) != anatomy.n_layer:
            problem = f"key {key} has wrong array length; expected {anatomy.n_layer}, got {len(value)}"
            raise GGUFError(anatomy.path, problem)
    if not any(t.name == "output.weight" for t in anatomy.output_tensors):
        raise GGUFError(anatomy.path, "missing tensor 'output.weight' (llama.cpp refuses an Apertus model without it)")


def build_apertus(ctx: GraphContext) -> None:
    """llama_model_apertus::graph: attn_norm, QKV, Q's and K's norms, RoPE, attention, residual;
    ffn_norm, up projection, xIELU, down projection, residual."""
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
        q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        freqs = w.rope_freqs(il)
        q = g.rope(q, inp_pos, freqs)
        k = g.rope(k, inp_pos, freqs)
        cur = ctx.build_attn(
            inp_attn, layer, w.layer(il, "attn_output.weight"), w.layer(il, "attn_output.bias"), q, k, v
        )
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        up = ctx.mm(w.layer_req(il, "ffn_up.weight"), cur)
        cur = ctx.mm(w.layer_req(il, "ffn_down.weight"), g.unary(up))  # ggml_xielu: a unary op
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _apertus
build_graph = build_apertus
