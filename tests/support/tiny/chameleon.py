"""Tiny models of Chameleon (planner.archs.chameleon): per-head LayerNorm Q/K norms, pre- or post-norms.

The vocabulary covers the image tokens (ids 4 to 8,196): llama.cpp sets their logits, and a smaller
one fails ggml's size check when it reserves the one-token graph."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, ff, hk, p = spec.n_embd, spec.weight_type, spec.n_ff, spec.head_k, f"blk.{il}."
    qk: Shapes = [
        (p + "attn_q_norm.weight", (hk, spec.n_head), Q.F32),
        (p + "attn_k_norm.weight", (hk, spec.n_head_kv), Q.F32),
        (p + "attn_q_norm.bias", (hk, spec.n_head), Q.F32),
        (p + "attn_k_norm.bias", (hk, spec.n_head_kv), Q.F32),
    ]
    return (
        norm(spec, il, "attn_norm")
        + qk
        + attention(spec, il)
        + norm(spec, il, "ffn_norm")
        + [(p + "ffn_gate.weight", (e, ff), w), (p + "ffn_down.weight", (ff, e), w), (p + "ffn_up.weight", (e, ff), w)]
    )


ZOO: dict[str, TinySpec] = {
    # Chameleon 7B's pre-norm layers in small, full multi-head attention
    "chameleon": TinySpec("chameleon", n_head_kv=4, n_vocab=8448, embd_type=Q.Q8_0, output_type=Q.Q8_0),
    # the 30B's Swin-style norms after attention and FFN
    "chameleon-swin": TinySpec(
        "chameleon",
        n_head_kv=4,
        n_vocab=8448,
        embd_type=Q.Q8_0,
        output_type=Q.Q8_0,
        extra_kv={"chameleon.swin_norm": True},
        name="tiny-chameleon-swin",
    ),
}
