"""Tiny models of Gemma 3n (planner.archs.gemma3n): gemma3's attention and GELU FFN, plus the AltUp router
and coefficients, Laurel's low-rank branch and the per-layer input gate."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm

# Gemma 3n's fixed sizes (llama_hparams: n_altup, laurel_rank, n_embd_altup; not read from the header)
GEMMA3N_ALTUP, GEMMA3N_LAUREL_RANK, GEMMA3N_EMBD_ALTUP = 4, 64, 256


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    """A Gemma 3n block (llama_model_gemma3n::load_arch_tensors)."""
    e, f32, hk, p = spec.n_embd, Q.F32, spec.head_k, f"blk.{il}."
    n, rank = GEMMA3N_ALTUP, GEMMA3N_LAUREL_RANK
    qk_norms: Shapes = [(p + "attn_q_norm.weight", (hk,), f32), (p + "attn_k_norm.weight", (hk,), f32)]
    out = norm(spec, il, "attn_norm") + attention(spec, il) + qk_norms + norm(spec, il, "post_attention_norm")
    out += norm(spec, il, "ffn_norm") + gated_ffn(spec, il) + norm(spec, il, "post_ffw_norm")
    return out + [
        *per_layer_input(spec, il, GEMMA3N_EMBD_ALTUP),
        (p + "altup_correct_coef.weight", (n, n), f32),
        (p + "altup_correct_scale.weight", (e,), f32),
        (p + "altup_predict_coef.weight", (n, n * n), f32),
        (p + "altup_router.weight", (e, n), f32),
        (p + "altup_router_norm.weight", (e,), f32),
        (p + "laurel_l.weight", (e, rank), spec.weight_type),
        (p + "laurel_r.weight", (rank, e), spec.weight_type),
        (p + "laurel_post_norm.weight", (e,), f32),
    ]


def per_layer_input(spec: TinySpec, il: int, width: int) -> Shapes:
    """A block's gate and projection of its per-layer input (`width` wide), and the norm after them."""
    e, w, p = spec.n_embd, spec.weight_type, f"blk.{il}."
    return [(p + "inp_gate.weight", (e, width), w), (p + "proj.weight", (width, e), w), *norm(spec, il, "post_norm")]


def per_layer_embeddings(spec: TinySpec, width: int) -> Shapes:
    """The per-layer token embeddings (`width` a layer), their projection from the embedding and its norm."""
    total = width * spec.n_layer
    return [
        ("per_layer_token_embd.weight", (total, spec.n_vocab), spec.embd_type),
        ("per_layer_model_proj.weight", (spec.n_embd, total), spec.weight_type),
        ("per_layer_proj_norm.weight", (width,), Q.F32),
    ]


def global_tensors(spec: TinySpec) -> Shapes:
    """Gemma 3n's tensors outside the blocks: the AltUp projections and the per-layer embeddings."""
    e, n = spec.n_embd, GEMMA3N_ALTUP
    altup: Shapes = [("altup_proj.weight", (e, e, n - 1), Q.F16), ("altup_unembd_proj.weight", (e, e, n - 1), Q.F16)]
    return altup + per_layer_embeddings(spec, GEMMA3N_EMBD_ALTUP) + output_norm(spec)


ZOO: dict[str, TinySpec] = {
    # 25 layers: llama.cpp gives only the first 20 a KV cache; the last five read layer 18's (windowed)
    # or layer 19's (global) cache, one window of every five layers being global
    "gemma3n": TinySpec(
        "gemma3n",
        n_layer=25,
        n_head=2,
        n_head_kv=1,
        n_swa=256,
        output_type=None,
        weight_type=Q.Q4_0,
        embd_type=Q.Q8_0,
        name="tiny-gemma-3n",
    ),
    # variants along the axes real releases differ in
    "gemma3n-e4b-array": TinySpec(  # E4B: 35 layers, its layer types as an explicit array, GQA, head size
        "gemma3n",
        n_layer=35,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_ff=128,
        n_swa=512,
        output_type=None,
        weight_type=Q.Q8_0,
        extra_kv={"gemma3n.attention.sliding_window_pattern": [True, True, True, True, False] * 7},
        covers=("explicit per-layer window array", "35 layers (15 sharing caches)", "GQA", "head size", "window 512"),
    ),
}
