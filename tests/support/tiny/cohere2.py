"""Tiny models of the architectures with attention and FFN side by side on one norm (planner.archs.cohere2):
Cohere 2, Command R, Falcon and Phi-2."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import (
    Shapes,
    TinySpec,
    attention,
    attn_output,
    biased_ffn,
    fused_qkv,
    gated_ffn,
    norm,
    output_norm,
    ungated_ffn,
)

_FUSED_QKV = ("phi2", "falcon")  # with norm biases; Phi-2's projections have biases too


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    a = spec.arch
    if a not in _FUSED_QKV:
        out = norm(spec, il, "attn_norm")
        if a == "command-r" and spec.n_layer >= 64:  # Command R+: per-head Q/K layer norms
            hk, p = spec.head_k, f"blk.{il}."
            out += [(p + "attn_q_norm.weight", (hk, spec.n_head), Q.F32)]
            out += [(p + "attn_k_norm.weight", (hk, spec.n_head_kv), Q.F32)]
        return out + attention(spec, il) + gated_ffn(spec, il)
    out = norm(spec, il, "attn_norm", bias=True) + fused_qkv(spec, il, bias=a == "phi2") + attn_output(spec, il)
    if a == "falcon":  # a GELU FFN without a gate, no biases; Falcon-40B's second norm feeds attention
        if "attn_norm_2" in spec.optional:
            out += norm(spec, il, "attn_norm_2", bias=True)
        return out + ungated_ffn(spec, il)
    return out + [(f"blk.{il}.attn_output.bias", (spec.n_embd,), Q.F32), *biased_ffn(spec, il)]  # phi2: biases


def global_tensors(spec: TinySpec) -> Shapes:
    if spec.arch not in _FUSED_QKV:
        return output_norm(spec)
    out = output_norm(spec, bias=True)
    return [*out, ("output.bias", (spec.n_vocab,), Q.F32)] if spec.arch == "phi2" else out


ZOO: dict[str, TinySpec] = {
    "phi2": TinySpec("phi2", extra_kv={"phi2.attention.layer_norm_epsilon": 1e-5}),
    "falcon": TinySpec("falcon", n_head_kv=1, extra_kv={"falcon.attention.layer_norm_epsilon": 1e-5}),
    "command-r": TinySpec(
        "command-r",
        n_head_kv=2,
        output_type=None,
        extra_kv={"command-r.logit_scale": 0.0625, "command-r.attention.layer_norm_epsilon": 1e-5},
    ),
    "cohere2": TinySpec(
        "cohere2",
        n_head_kv=2,
        n_swa=256,
        n_layer=8,
        output_type=None,
        extra_kv={"cohere2.logit_scale": 0.0625, "cohere2.attention.layer_norm_epsilon": 1e-5},
    ),
    # variants along the axes real releases differ in
    "command-r-plus-qk-norm": TinySpec(  # Command R+: 64 layers, and with them per-head Q/K layer norms
        "command-r",
        n_layer=64,
        n_ff=128,
        n_head_kv=1,
        output_type=None,
        extra_kv={"command-r.logit_scale": 0.0833, "command-r.attention.layer_norm_epsilon": 1e-5},
        covers=("Q/K norms (64 layers)", "MQA"),
    ),
    "falcon-40b-two-norms": TinySpec(  # Falcon-40B: a second layer norm for attention, 8 KV heads; tied here
        "falcon",
        n_head=8,
        n_head_kv=2,
        output_type=None,
        optional=("attn_norm_2",),
        extra_kv={"falcon.attention.layer_norm_epsilon": 1e-5},
        covers=("second attention norm", "GQA", "tied"),
    ),
    "cohere2-6-layers": TinySpec(  # 6 layers: not a multiple of the period of 4, the last two windowed
        "cohere2",
        n_head_kv=1,
        n_swa=1024,
        n_layer=6,
        output_type=None,
        extra_kv={"cohere2.logit_scale": 0.25, "cohere2.attention.layer_norm_epsilon": 1e-5},
        covers=("layers not a multiple of the pattern: last layer sliding", "MQA", "window 1,024"),
    ),
    "cohere2-swa-array": TinySpec(
        "cohere2",
        n_head_kv=4,
        n_swa=128,
        n_layer=5,
        output_type=None,
        extra_kv={
            "cohere2.logit_scale": 0.25,
            "cohere2.attention.layer_norm_epsilon": 1e-5,
            "cohere2.attention.sliding_window_pattern": [True, False, True, True, False],
        },
        covers=("explicit per-layer window array", "MHA", "last layer global", "window 128"),
    ),
    # a vocabulary large enough that the logits make the compute buffer's peak: where the norms before them
    # run in place (an RMS norm would, a layer norm does not) decides what else is alive at that peak
    "cohere2-one-global-layer": TinySpec(
        "cohere2",
        n_layer=2,
        n_embd=256,
        n_head=8,
        n_head_kv=8,
        n_ff=512,
        n_vocab=4096,
        n_swa=4096,
        output_type=None,
        extra_kv={
            "cohere2.logit_scale": 0.125,
            "cohere2.attention.layer_norm_epsilon": 1e-5,
            "cohere2.attention.sliding_window_pattern": [True, False],
        },
        covers=("one full-attention layer", "vocabulary 4,096 (logits at the peak)", "window 4,096", "MHA"),
    ),
    "cohere2-two-global-layers": TinySpec(
        "cohere2",
        n_layer=6,
        n_head_kv=4,
        n_vocab=2048,
        n_swa=4096,
        output_type=None,
        extra_kv={
            "cohere2.logit_scale": 0.125,
            "cohere2.attention.layer_norm_epsilon": 1e-5,
            "cohere2.attention.sliding_window_pattern": [False, True, True, False, True, True],
        },
        covers=("two full-attention layers, the first one full", "vocabulary 2,048 (logits at the peak)"),
    ),
    "cohere2-period-key": TinySpec(  # the period written as an integer key: 1 full layer (layer 3) of 5
        "cohere2",
        n_layer=5,
        n_head_kv=4,
        n_ff=512,
        n_vocab=4096,
        n_swa=1024,
        swa_pattern=4,
        output_type=None,
        extra_kv={"cohere2.logit_scale": 0.125, "cohere2.attention.layer_norm_epsilon": 1e-5},
        covers=("window period as an integer key (1 in 4)", "vocabulary 4,096 (logits at the peak)"),
    ),
    "command-r-large-vocab": TinySpec(
        "command-r",
        n_head_kv=2,
        n_vocab=4096,
        output_type=None,
        extra_kv={"command-r.logit_scale": 0.0625, "command-r.attention.layer_norm_epsilon": 1e-5},
        covers=("vocabulary 4,096 (logits at the peak)",),
    ),
    "phi2-large-vocab": TinySpec(
        "phi2",
        n_vocab=4096,
        extra_kv={"phi2.attention.layer_norm_epsilon": 1e-5},
        covers=("vocabulary 4,096 (logits at the peak)",),
    ),
    "falcon-large-vocab": TinySpec(
        "falcon",
        n_head_kv=1,
        n_vocab=4096,
        output_type=None,
        extra_kv={"falcon.attention.layer_norm_epsilon": 1e-5},
        covers=("vocabulary 4,096 (logits at the peak)", "tied"),
    ),
    "phi2-mha-partial-rope": TinySpec(  # Phi-2: 32 full heads, 32 of 80 dimensions rotated
        "phi2",
        n_head_kv=4,
        extra_kv={"phi2.attention.layer_norm_epsilon": 1e-5, "phi2.rope.dimension_count": 16},
        covers=("MHA", "partial RoPE"),
    ),
}
