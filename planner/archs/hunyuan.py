"""Hunyuan dense and Hunyuan VL's text model (src/models/hunyuan-vl.cpp; hunyuan-dense.cpp builds the same
graph): llama's layers with per-head Q/K norms applied after RoPE (K first), a SiLU-gated FFN; Hunyuan VL
with rope.dimension_sections uses multi-section RoPE (four positions a token). Maincoder
(src/models/maincoder.cpp) is the same graph with Q's norm before K's. Hunyuan MoE
(src/models/hunyuan-moe.cpp): the same attention, then an always-on shared expert and softmax-routed
experts, summed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import read_experts, require
from planner.errors import GGUFError
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy


def _hunyuan_dense(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_hunyuan_vl::load_arch_hparams: the RMS epsilon is required; rope.dimension_sections
    # only picks ggml_rope_multi over ggml_rope_ext (NeoX RoPE either way: one position a token).
    # llama_model_base::load_hparams: an expert count of 1 is no experts at all
    require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    sections = meta.get("rope.dimension_sections")
    if isinstance(sections, list) and len(sections) != 4:
        key = f"{anatomy.architecture}.rope.dimension_sections"
        raise GGUFError(anatomy.path, f"key {key} has wrong array length; expected 4, got {len(sections)}")
    # llama_model_rope_type: Hunyuan VL's M-RoPE when the first two sections are set (use_mrope), which
    # gives four positions a token (llama_hparams::n_pos_per_embd); Hunyuan dense keeps NeoX RoPE
    if anatomy.architecture == "hunyuan_vl" and _uses_mrope(sections):
        anatomy.n_pos_per_embd = 4
    if meta.int_or("expert_count", 0) > 1:
        read_experts(anatomy, meta)


def _uses_mrope(sections: object) -> bool:
    """llama_hparams::use_mrope: the first two RoPE sections are set (a single number fills all four)."""
    if isinstance(sections, list):
        return len(sections) >= 2 and sections[0] > 0 and sections[1] > 0
    return isinstance(sections, int) and sections > 0


def _hunyuan_moe(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_hunyuan_moe::load_arch_hparams: the RMS epsilon and the experts' FFN length are required
    # (the experts are feed_forward_length wide all the same); it reads no expert weights scale
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", "expert_feed_forward_length")
    read_experts(anatomy, meta)
    if anatomy.experts is not None:
        anatomy.experts.weights_scale = 0.0


def _rules(anatomy: ModelAnatomy, meta: Meta) -> None:
    if anatomy.architecture == "hunyuan-moe":
        _hunyuan_moe(anatomy, meta)
    elif anatomy.architecture == "maincoder":  # llama_model_maincoder::load_arch_hparams
        require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    else:
        _hunyuan_dense(anatomy, meta)


def build_hunyuan_dense(ctx: GraphContext) -> None:
    """llama_model_hunyuan_vl::graph: attn_norm, QKV, RoPE on Q and K, then K's and Q's norms (Maincoder:
    Q's first), attention, residual; ffn_norm, SwiGLU (Hunyuan MoE: the shared expert, then the routed
    experts, summed), residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    q_first = m.architecture == "maincoder"
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        if q_first:
            q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
            k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
        else:
            k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
            q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), None, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if m.architecture == "hunyuan-moe":
            shared = ctx.build_shared_expert(cur, il)
            routed = ctx.build_moe_ffn(cur, il, m.moe.n_expert, m.moe.n_used, "silu", True, m.moe.weights_scale)
            cur = g.add(routed, shared)
        else:
            cur = ctx.build_layer_ffn(cur, il)
        inp_l = g.add(cur, ffn_inp)
    final_output(ctx, inp_l)


read_hparams = _rules
build_graph = build_hunyuan_dense
