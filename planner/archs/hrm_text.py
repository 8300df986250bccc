"""HRM-Text (src/models/hrm-text.cpp): a hierarchical recurrent model. Two stacks of layers (L and H)
are run over and over: per H cycle, the L stack L-cycle times on the sum of the two states, then the
H stack once; each run is a slot of the header's block count with a KV cache of its own, while the
weights are the two stacks' only. Weightless RMS norms, a sigmoid attention gate, no output norm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.errors import GGUFError
from planner.ggml_graph import Tensor
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import ModelAnatomy

_KEYS = ("hrm.layers_per_stack", "hrm.h_cycles", "hrm.l_cycles")


def _cycles(model: ModelAnatomy) -> tuple[int, int, int]:
    lps, h, lc = (int(model.metadata.get(f"{model.architecture}.{k}", 0)) for k in _KEYS)
    return lps, h, lc


def _hrm_text(anatomy: ModelAnatomy, meta: Meta) -> None:
    # llama_model_hrm_text::load_arch_hparams: the RMS epsilon and the stack sizes are required, and the
    # block count must be one slot per layer run: layers_per_stack x h_cycles x (l_cycles + 1)
    require(anatomy, meta, "attention.layer_norm_rms_epsilon", *_KEYS)
    lps, h, lc = _cycles(anatomy)
    if min(lps, h, lc) <= 0 or anatomy.n_layer != lps * h * (lc + 1):
        problem = (
            f"hrm_text: {anatomy.n_layer} blocks for {lps} layers per stack, {h} H cycles and {lc} L cycles "
            "(llama.cpp aborts: it needs layers_per_stack x h_cycles x (l_cycles + 1))"
        )
        raise GGUFError(anatomy.path, problem)


def _stack(
    ctx: GraphContext, inp_attn: dict[str, Tensor | None], inp_pos: Tensor, cur: Tensor, slot: int, h: bool
) -> Tensor:
    """build_stack: the stack's layers on their slots' caches, then a weightless norm."""
    g, w, m = ctx.g, ctx.w, ctx.model
    lps = _cycles(m)[0]
    for il in range(lps):
        s, bid = slot + il, (lps if h else 0) + il
        weights, layer = m.layers[bid], m.layers[s]
        inp_sa = cur
        cur = ctx.build_norm(cur, None)
        gate = ctx.mm(w.layer_req(bid, "attn_gate.weight"), cur)
        hd = weights.head_dim_k
        q, k, v = ctx.build_qkv(weights, cur, hd, weights.n_head, hd, weights.n_head_kv)
        q = g.rope(q, inp_pos)
        k = g.rope(k, inp_pos)
        cur = ctx.build_attn(inp_attn, layer, None, None, q, k, v)
        cur = ctx.mm(w.layer_req(bid, "attn_output.weight"), g.mul(cur, g.unary(gate)))
        cur = g.add(cur, inp_sa)
        inp_sa = cur
        cur = g.add(ctx.build_layer_ffn(ctx.build_norm(cur, None), bid), inp_sa)
    return ctx.build_norm(cur, None)


def build_hrm_text(ctx: GraphContext) -> None:
    """llama_model_hrm_text::graph: zH from the (scaled) embeddings, zL from its learned start; per H cycle
    the L stack on zH + zL l_cycles times, then the H stack on zH + zL; the output rows of zH, the LM head."""
    g, w, m = ctx.g, ctx.w, ctx.model
    lps, n_h, n_l = _cycles(m)
    z_h = ctx.build_inp_embd()
    if m.metadata.get(f"{m.architecture}.embedding_scale"):  # llama-graph's f_embedding_scale
        z_h = g.scale(z_h)
    inp_pos = ctx.build_inp_pos()
    inp_attn = ctx.build_attn_inp_kv()
    out_ids = ctx.build_inp_out_ids()
    z_l = w.get("hrm.z_l_init")
    for h in range(n_h):
        for lc in range(n_l):
            z_l = _stack(ctx, inp_attn, inp_pos, g.add(z_h, z_l), (h * (n_l + 1) + lc) * lps, False)
        z_h = _stack(ctx, inp_attn, inp_pos, g.add(z_h, z_l), (h * (n_l + 1) + n_l) * lps, True)
    cur = g.get_rows(z_h, out_ids)
    ctx.set_outputs(cur, ctx.mm(ctx.output_weight(), cur))


read_hparams = _hrm_text
build_graph = build_hrm_text
