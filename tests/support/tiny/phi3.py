"""Tiny models of Phi-3 (planner.archs.phi3): a fused QKV projection, a fused gate/up FFN."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attn_output, experts, fused_ffn, fused_qkv, norm, output_norm
from tests.support.tiny.common import qkv as qkv_separate


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    qkv = qkv_separate(spec, il) if "separate_qkv" in spec.optional else fused_qkv(spec, il)
    attn = qkv + attn_output(spec, il)
    if spec.arch == "phimoe":  # layer norms and the output projection with biases, then the experts
        bias = [(f"blk.{il}.attn_output.bias", (spec.n_embd,), Q.F32)]
        gate_inp, gate, up, down = experts(spec, il, spec.n_ff)
        ffn = [gate_inp, gate, down, up]
        return norm(spec, il, "attn_norm", True) + attn + bias + norm(spec, il, "ffn_norm", True) + ffn
    return norm(spec, il, "attn_norm") + attn + norm(spec, il, "ffn_norm") + fused_ffn(spec, il)


def global_tensors(spec: TinySpec) -> Shapes:
    """The output norm (biased for Phi-3.5-MoE); the long and short RoPE factors of the 128k-context
    releases (LongRoPE)."""
    if spec.arch == "phimoe":
        return output_norm(spec, bias=True) + [("output.bias", (spec.n_vocab,), Q.F32)]
    if spec.extra_kv.get(f"{spec.arch}.rope.scaling.type") != "longrope":
        return output_norm(spec)
    n_rot = spec.count("rope.dimension_count", spec.head_k)
    factors: Shapes = [(f"rope_factors_{x}.weight", (n_rot // 2,), Q.F32) for x in ("long", "short")]
    return factors + output_norm(spec)


def header_kv(spec: TinySpec) -> dict[str, object]:
    """RoPE over the whole head, unless the spec says otherwise (Phi-4-mini rotates 3/4 of it)."""
    key = f"{spec.arch}.rope.dimension_count"
    return {} if key in spec.extra_kv else {key: spec.head_k}


ZOO: dict[str, TinySpec] = {
    "phi3": TinySpec("phi3", n_head_kv=4, weight_type=Q.Q8_0),
    # Phi-3.5-MoE's shape: 8 experts, 2 used, biased layer norms and output
    "phimoe": TinySpec("phimoe", n_head_kv=2, n_expert=8, n_expert_used=2, n_ff=64),
    # variants along the axes real releases differ in
    "phi3-longrope": TinySpec(  # Phi-3 / 3.5 mini 128k: LongRoPE factors, a sliding window llama.cpp ignores
        "phi3",
        n_head_kv=4,
        n_ctx_train=131072,
        extra_kv={
            "phi3.rope.scaling.type": "longrope",
            "phi3.rope.scaling.original_context_length": 4096,
            "phi3.attention.sliding_window": 2047,
        },
        covers=("LongRoPE factors", "sliding window key (ignored)", "MHA"),
    ),
    "phi4-mini-shape": TinySpec(  # Phi-4-mini: 24 heads over 8, 3/4 of each head rotated, tied
        "phi3",
        n_head=4,
        n_head_kv=2,
        output_type=None,
        extra_kv={"phi3.rope.dimension_count": 24, "phi3.attention.sliding_window": 0},
        covers=("GQA", "partial RoPE", "tied"),
    ),
    "phi3-separate-qkv": TinySpec("phi3", n_head_kv=1, optional=("separate_qkv",), covers=("separate Q/K/V", "MQA")),
}
