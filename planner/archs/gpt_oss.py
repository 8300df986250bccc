"""gpt-oss (src/models/openai-moe-iswa.cpp): attention sinks, a window on every other layer, SwiGLU-OAI experts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import (
    load_swa_pattern,
    read_experts,
)
from planner.ggml_graph import FLAG_OUTPUT
from planner.graphs.context import GraphContext
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _gpt_oss(anatomy: ModelAnatomy, meta: Meta) -> None:
    read_experts(anatomy, meta)
    anatomy.swa_type = SWA_STANDARD
    anatomy.n_swa = meta.int_or("attention.sliding_window", 0)
    load_swa_pattern(anatomy, meta, 2)


def build_gpt_oss(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_full = ctx.build_attn_inp_kv(swa=False)
    inp_swa = ctx.build_attn_inp_kv(swa=True)
    out_ids = ctx.build_inp_out_ids()
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(
            inp,
            layer,
            w.layer(il, "attn_output.weight"),
            w.layer(il, "attn_output.bias"),
            q,
            k,
            v,
            sinks=w.layer(il, "attn_sinks.weight"),
            iswa=True,
        )
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "post_attention_norm.weight"), il=il)
        cur = ctx.build_moe_ffn(
            cur,
            il,
            m.moe.n_expert,
            m.moe.n_used,
            "swiglu_oai",
            norm_w=False,
            w_scale=m.moe.weights_scale,
            gating="softmax_weight",
            gate_inp_b=w.layer(il, "ffn_gate_inp.bias"),
        )
        inp_l = g.add(cur, ffn_inp)
    inp_l.flags |= FLAG_OUTPUT  # t_h_nextn: the last hidden state is kept as an output
    cur = g.get_rows(inp_l, out_ids)
    cur = ctx.build_norm(cur, w.get_optional("output_norm.weight"))
    embd = cur
    cur = ctx.mm(ctx.output_weight(), cur)
    ctx.set_outputs(embd, cur)


read_hparams = _gpt_oss
build_graph = build_gpt_oss
