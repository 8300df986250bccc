"""dots.llm1 and the MoE architectures llama.cpp builds in its shape (src/models/dots1.cpp, bailingmoe.cpp,
bailingmoe2.cpp, mellum.cpp, hy-v3.cpp): pre-norm attention with per-head Q/K norms (none in Ling's
first release), RoPE, then a dense SwiGLU FFN in the leading layers and routed experts elsewhere,
with an always-on shared expert added after them (none in Mellum). Mellum windows 3 of every 4
layers. Hy V3 keeps every token to the output norm (its multi-token-prediction input) and picks the
output rows after it; its multi-token-prediction layers are skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import MTP_FFN_AND_HEADS, load_swa_pattern, read_experts, require, require_output
from planner.errors import GGUFError
from planner.ggml_graph import FLAG_OUTPUT
from planner.graphs.blocks import attention_inputs, final_output
from planner.graphs.context import GraphContext
from planner.hparams import GATING_NAMES, GATING_SIGMOID, GATING_SOFTMAX
from planner.model import SWA_STANDARD

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy

# the header keys each architecture's load_arch_hparams requires beside the RMS epsilon
_REQUIRED = {
    "dots1": ("expert_feed_forward_length", "expert_shared_count"),
    "bailingmoe": ("expert_feed_forward_length", "expert_shared_count"),
    "bailingmoe2": ("expert_feed_forward_length", "expert_shared_count", "expert_gating_func"),
    "mellum": ("expert_feed_forward_length",),
    "hy_v3": ("expert_feed_forward_length",),
}
# the router llama.cpp's graph uses whatever the header says (the others take the header's)
_FIXED_ROUTER = {"bailingmoe": GATING_SOFTMAX, "mellum": GATING_SOFTMAX}


def _dots1(anatomy: ModelAnatomy, meta: Meta) -> None:
    arch = anatomy.architecture
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", *_REQUIRED[arch])
    if arch != "hy_v3":  # none of the others ties the output to the embeddings
        require_output(anatomy)
    if arch == "hy_v3":
        anatomy.mtp_loaded = MTP_FFN_AND_HEADS
    read_experts(anatomy, meta)
    if arch == "hy_v3" and anatomy.experts is None:  # its expert tensors are all optional: a dense Hy V3
        return
    if anatomy.experts is None or anatomy.experts.n_used == 0:  # load_arch_tensors throws (or asserts)
        raise GGUFError(anatomy.path, f"{arch}: n_expert and n_expert_used must be > 0 (llama.cpp refuses the model)")
    experts = anatomy.experts
    if arch in _FIXED_ROUTER:
        experts.gating_func = _FIXED_ROUTER[arch]
    elif arch == "hy_v3":  # none means sigmoid
        experts.gating_func = experts.gating_func or GATING_SIGMOID
    elif experts.gating_func not in GATING_NAMES:  # 0 (none) makes build_moe_ffn abort
        problem = f"expert_gating_func {experts.gating_func} is unknown: llama.cpp aborts building the graph"
        raise GGUFError(anatomy.path, problem)
    if arch == "mellum":  # expert weights always normalised
        experts.weights_norm = True
        n_swa = meta.int_or("attention.sliding_window", 0)
        if n_swa > 0:  # llama_model_mellum::load_arch_hparams: a standard window on 3 of every 4 layers
            anatomy.swa_type = SWA_STANDARD
            anatomy.n_swa = n_swa
            load_swa_pattern(anatomy, meta, 4)
    # Ling's first release has experts on every layer, Hy V3 on the layers that have their tensors
    if arch in ("dots1", "bailingmoe2", "mellum"):
        experts.n_layer_dense_lead = meta.int_or("leading_dense_block_count", 0)


def build_dots1(ctx: GraphContext) -> None:
    """llama_model_dots1::graph (and its look-alikes): attn_norm, QKV, Q's norm and RoPE, K's norm and
    RoPE (Mellum, Hy V3: both norms, then both RoPEs), attention, residual; ffn_norm, then a SwiGLU FFN
    in the dense layers, else routed experts plus the shared expert, residual."""
    g, w, m = ctx.g, ctx.w, ctx.model
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos()
    iswa = m.has_swa
    inp_full, inp_swa = attention_inputs(ctx, iswa)
    out_ids = ctx.build_inp_out_ids()
    norms_first = m.architecture in ("mellum", "hy_v3")
    rows_at_end = m.architecture == "hy_v3"  # embeddings_nextn_masked is off: rows picked after the norm
    for layer in m.trunk_layers:
        il = layer.index
        inp_sa = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), il=il)
        hd = layer.head_dim_k
        q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
        q_norm, k_norm = w.layer(il, "attn_q_norm.weight"), w.layer(il, "attn_k_norm.weight")
        if norms_first:
            q = ctx.build_norm(q, q_norm, il=il)
            k = ctx.build_norm(k, k_norm, il=il)
            q = g.rope(q, inp_pos)
            k = g.rope(k, inp_pos)
        else:
            if q_norm is not None:
                q = ctx.build_norm(q, q_norm, il=il)
            q = g.rope(q, inp_pos)
            if k_norm is not None:
                k = ctx.build_norm(k, k_norm, il=il)
            k = g.rope(k, inp_pos)
        inp = inp_swa if layer.is_swa else inp_full
        cur = ctx.build_attn(inp, layer, w.layer(il, "attn_output.weight"), None, q, k, v, iswa=iswa)
        if il == m.n_trunk - 1 and not rows_at_end:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.add(cur, inp_sa)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), il=il)
        if w.layer(il, "ffn_gate_inp.weight") is None or il < m.moe.n_layer_dense_lead:
            cur = ctx.build_layer_ffn(cur, il)
        else:
            probs_b = w.layer(il, "exp_probs_b")  # Hy V3: no suffix
            cur = ctx.build_routed_experts(cur, il, m.moe, shared=None, exp_probs_b=probs_b)
        inp_l = g.add(cur, ffn_inp)
    if not rows_at_end:
        final_output(ctx, inp_l)
        return
    h_nextn = ctx.build_norm(inp_l, w.get_optional("output_norm.weight"))
    h_nextn.flags |= FLAG_OUTPUT  # t_h_nextn, the multi-token-prediction head's input, is a graph output
    cur = g.get_rows(h_nextn, out_ids)
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur))


read_hparams = _dots1
build_graph = build_dots1
