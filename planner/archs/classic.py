"""Pre-norm decoders llama.cpp builds from one template (src/models/baichuan.cpp, refact.cpp, bloom.cpp,
mpt.cpp, gptneox.cpp, qwen.cpp, codeshell.cpp, jais.cpp, jais2.cpp, nemotron.cpp, plamo.cpp, chatglm.cpp,
openelm.cpp): a norm, Q/K/V (fused or not), RoPE or none (ALiBi, learned positions), attention, the
residual, a norm and an FFN. They differ in the norm (RMS or layer norm with biases), the FFN's
activation and gate, which biases the graph adds, and where the residuals meet (GPT-NeoX's and
PLaMo's parallel layers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner.archs.common import require
from planner.errors import ModelError
from planner.ggml_graph import Tensor
from planner.graphs.blocks import final_output
from planner.graphs.context import GraphContext

if TYPE_CHECKING:
    from planner.meta import Meta
    from planner.model import LayerAnatomy, ModelAnatomy


@dataclass(frozen=True)
class _Shape:
    """How one architecture fills the template."""

    rms: bool = True  # RMS norms; else layer norms, with the biases the file has
    rope: bool = True  # RoPE on Q and K; else no positions in the graph (ALiBi)
    act: str = "silu"  # the FFN's activation
    gated: bool = True  # a gate projection beside up (LLM_FFN_PAR); else up, act, down
    biases: bool = True  # the graph adds the output-projection and FFN biases the file has
    residual: str = "sequential"  # or "neox" (use_parallel_residual) or "plamo" (the FFN reads the attention's norm)


_SHAPES = {
    "baichuan": _Shape(biases=False),  # RoPE only on the 7B (32 layers); ALiBi otherwise
    "refact": _Shape(rope=False, biases=False),  # ALiBi; its optional biases are loaded, never added
    "bloom": _Shape(rms=False, rope=False, act="gelu", gated=False),
    "mpt": _Shape(rms=False, rope=False, act="gelu", gated=False),
    "gptneox": _Shape(rms=False, act="gelu", gated=False, residual="neox"),
    "qwen": _Shape(biases=False),
    "codeshell": _Shape(rms=False, act="gelu", gated=False),
    "jais": _Shape(rms=False, rope=False),
    "jais2": _Shape(rms=False, act="relu_sqr", gated=False),
    "nemotron": _Shape(rms=False, act="relu_sqr", gated=False),
    "plamo": _Shape(biases=False, residual="plamo"),
    "chatglm": _Shape(act="swiglu", gated=False, biases=False),  # gate and up fused in ffn_up
    "openelm": _Shape(biases=False),
}

_LAYER_NORM_EPS = ("bloom", "mpt", "gptneox", "codeshell", "jais", "jais2", "nemotron")


def read_classic(anatomy: ModelAnatomy, meta: Meta) -> None:
    """load_arch_hparams: the norm epsilon each requires, MPT's optional clamp, GPT-NeoX's residual switch."""
    arch = anatomy.architecture
    if arch in _LAYER_NORM_EPS:
        require(anatomy, meta, "attention.layer_norm_epsilon")
    else:
        require(anatomy, meta, "attention.layer_norm_rms_epsilon")
    if arch == "mpt":
        anatomy.f_clamp_kqv = meta.float_or("attention.clamp_kqv", 0.0)
        if any(layer.tensor("attn_q_norm.weight") for layer in anatomy.layers):
            # the graph reshapes a view of the fused QKV projection: GGML_ASSERT(ggml_is_contiguous(a))
            raise ModelError(anatomy.path, "MPT with Q/K norms: llama.cpp would abort building its graph")
    if arch == "gptneox":
        require(anatomy, meta, "use_parallel_residual")
    if arch == "baichuan" and anatomy.n_layer != 32:
        # llama_model_baichuan: only the 7B (32 layers) has RoPE; the graph builds no positions otherwise
        anatomy.use_rope = False
    if not _SHAPES[arch].rope:
        anatomy.use_rope = False


def _openelm_qkv(ctx: GraphContext, layer: LayerAnatomy, cur: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """OpenELM: one projection reshaped to heads, Q/K/V as views of it, per-head Q and K norms."""
    g, w, il = ctx.g, ctx.w, layer.index
    hd, n_head, n_kv = layer.head_dim_k, layer.n_head, layer.n_head_kv
    cur = ctx.mm(w.layer_req(il, "attn_qkv.weight"), cur)
    cur = g.reshape(cur, hd, n_head + 2 * n_kv, ctx.n_tokens)
    nb = (cur.nb[1], cur.nb[2])
    q = g.view(cur, (hd, n_head, ctx.n_tokens), nb, 0)
    k = g.view(cur, (hd, n_kv, ctx.n_tokens), nb, cur.nb[1] * n_head)
    v = g.view(cur, (hd, n_kv, ctx.n_tokens), nb, cur.nb[1] * (n_head + n_kv))
    q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), il=il)
    k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), il=il)
    return q, k, v


def _mpt_qk_norm(ctx: GraphContext, layer: LayerAnatomy, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
    """MPT's optional Q/K layer norms over the whole projection."""
    g, w, il, hd, n_tok = ctx.g, ctx.w, layer.index, layer.head_dim_k, ctx.n_tokens
    q = g.reshape(q, hd * layer.n_head, n_tok)
    k = g.reshape(k, hd * layer.n_head_kv, n_tok)
    q = ctx.build_norm(q, w.layer(il, "attn_q_norm.weight"), w.layer(il, "attn_q_norm.bias"), rms=False, il=il)
    k = ctx.build_norm(k, w.layer(il, "attn_k_norm.weight"), w.layer(il, "attn_k_norm.bias"), rms=False, il=il)
    return g.reshape(q, hd, layer.n_head, n_tok), g.reshape(k, hd, layer.n_head_kv, n_tok)


def _ffn(ctx: GraphContext, shape: _Shape, cur: Tensor, il: int) -> Tensor:
    w = ctx.w

    def bias(name: str) -> Tensor | None:
        return w.layer(il, name) if shape.biases else None

    return ctx.build_ffn(
        cur,
        w.layer(il, "ffn_up.weight"),
        w.layer(il, "ffn_gate.weight") if shape.gated else None,
        w.layer(il, "ffn_down.weight"),
        shape.act,
        shape.gated,
        up_b=bias("ffn_up.bias"),
        gate_b=bias("ffn_gate.bias") if shape.gated else None,
        down_b=bias("ffn_down.bias"),
        act_scales=w.layer(il, "ffn_act.scales"),
    )


def build_classic(ctx: GraphContext) -> None:
    g, w, m = ctx.g, ctx.w, ctx.model
    arch = m.architecture
    shape = _SHAPES[arch]
    rms = shape.rms
    inp_l = ctx.build_inp_embd()
    inp_pos = ctx.build_inp_pos() if m.use_rope else None
    inp_attn = ctx.build_attn_inp_kv()
    if arch == "bloom":  # a layer norm of the embeddings
        inp_l = ctx.build_norm(inp_l, w.get("token_embd_norm.weight"), w.get("token_embd_norm.bias"), rms=False, il=0)
    position_embd = w.get_optional("position_embd.weight") if arch == "mpt" else None
    if position_embd is not None:  # MPT's optional learned positions
        inp_l = g.add(inp_l, g.get_rows(position_embd, ctx.build_inp_pos()))
    out_ids = ctx.build_inp_out_ids()
    parallel = m.metadata.get(f"{arch}.use_parallel_residual") if shape.residual == "neox" else None
    for layer in m.trunk_layers:
        il = layer.index
        residual = inp_l
        cur = ctx.build_norm(inp_l, w.layer(il, "attn_norm.weight"), w.layer(il, "attn_norm.bias"), rms=rms, il=il)
        sa_inp = cur
        hd = layer.head_dim_k
        if arch == "openelm":
            q, k, v = _openelm_qkv(ctx, layer, cur)
        else:
            q, k, v = ctx.build_qkv(layer, cur, hd, layer.n_head, hd, layer.n_head_kv)
            if arch == "mpt" and w.layer(il, "attn_q_norm.weight") is not None:
                q, k = _mpt_qk_norm(ctx, layer, q, k)
        if inp_pos is not None:
            q = g.rope(q, inp_pos)
            k = g.rope(k, inp_pos)
        wo_b = w.layer(il, "attn_output.bias") if shape.biases else None
        cur = ctx.build_attn(inp_attn, layer, w.layer(il, "attn_output.weight"), wo_b, q, k, v)
        if il == m.n_trunk - 1:
            cur = g.get_rows(cur, out_ids)
            if shape.residual == "plamo":
                sa_inp = g.get_rows(sa_inp, out_ids)
            residual = g.get_rows(residual, out_ids)
        if shape.residual == "plamo":  # the FFN reads the attention's norm; both added to the input
            cur = g.add(_ffn(ctx, shape, sa_inp, il), cur)
            inp_l = g.add(cur, residual)
            continue
        if parallel:  # GPT-NeoX: x + attn(ln1(x)) + ffn(ln2(x))
            attn_out = cur
            cur = ctx.build_norm(residual, w.layer(il, "ffn_norm.weight"), w.layer(il, "ffn_norm.bias"), rms=rms, il=il)
            cur = g.add(_ffn(ctx, shape, cur, il), residual)
            inp_l = g.add(cur, attn_out)
            continue
        # OpenELM adds the residual first
        ffn_inp = g.add(residual, cur) if arch == "openelm" else g.add(cur, residual)
        cur = ctx.build_norm(ffn_inp, w.layer(il, "ffn_norm.weight"), w.layer(il, "ffn_norm.bias"), rms=rms, il=il)
        inp_l = g.add(_ffn(ctx, shape, cur, il), ffn_inp)
    final_output(ctx, inp_l, rms=rms)


read_hparams = read_classic
build_graph = build_classic
