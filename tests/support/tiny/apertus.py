"""Tiny models of Apertus (planner.archs.apertus): per-head Q/K norms with biases, an FFN without a gate
activated by xIELU."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, norm, output_norm, ungated_ffn

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    hk, p = spec.head_k, f"blk.{il}."
    qk_norms: Shapes = [(p + f"attn_{n}_norm.{s}", (hk,), Q.F32) for n in ("q", "k") for s in ("weight", "bias")]
    attn = norm(spec, il, "attn_norm") + attention(spec, il) + qk_norms
    return attn + norm(spec, il, "ffn_norm") + ungated_ffn(spec, il)


ZOO: dict[str, TinySpec] = {
    # xIELU parameters per layer (an array) or for all layers (one number)
    "apertus": TinySpec(
        "apertus",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        extra_kv={
            "xielu.alpha_n": [0.8, 0.7, 0.6, 0.5],  # keys without the architecture's prefix
            "xielu.alpha_p": 0.8,
            "xielu.beta": 0.5,
            "xielu.eps": 1e-6,
        },
    ),
    # variants along the axes real releases differ in
    "apertus-rope-freqs": TinySpec(  # Llama 3 RoPE factors, one xIELU value for all layers, MQA
        "apertus",
        n_head_kv=1,
        optional=("rope_freqs",),
        extra_kv={"xielu.alpha_n": 0.8, "xielu.alpha_p": 0.8, "xielu.beta": 0.5, "xielu.eps": 1e-6},
        covers=("rope_freqs", "xIELU scalars", "MQA"),
    ),
}
