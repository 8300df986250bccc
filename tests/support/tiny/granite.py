"""Tiny models of Granite and Granite MoE (planner.archs.granite): llama's layers with four scales; the MoE
variant's shared expert, where it has one, has no gate of its own."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, experts, gated_ffn, norm, output_norm, shared_expert

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    out = norm(spec, il, "attn_norm") + attention(spec, il) + norm(spec, il, "ffn_norm")
    if not spec.n_expert:
        return out + gated_ffn(spec, il)
    out += experts(spec, il, spec.n_ff_exp or spec.n_ff)
    return out + shared_expert(spec, il, spec.n_ff_shexp) if spec.n_ff_shexp else out


def _granite_scales(arch: str) -> dict[str, object]:
    """Granite's embedding, residual, attention and logit scales (logit_scale is required)."""
    return {
        f"{arch}.logit_scale": 8.0,
        f"{arch}.residual_scale": 0.22,
        f"{arch}.embedding_scale": 12.0,
        f"{arch}.attention.scale": 0.0078125,
    }


ZOO: dict[str, TinySpec] = {
    "granite": TinySpec("granite", weight_type=Q.Q8_0, output_type=None, extra_kv=_granite_scales("granite")),
    "granitemoe": TinySpec("granitemoe", n_expert=4, n_expert_used=2, n_ff=64, extra_kv=_granite_scales("granitemoe")),
    "granitemoe-shared": TinySpec(
        "granitemoe",
        n_expert=8,
        n_expert_used=2,
        n_ff=64,
        n_ff_shexp=128,
        weight_type=Q.Q4_0,
        name="tiny-granitemoe-shared",
        extra_kv=_granite_scales("granitemoe"),
    ),
    # variants along the axes real releases differ in
    "granite-gqa-untied": TinySpec(  # Granite 3.x 8B: 32 heads over 8; untied here
        "granite", n_head=8, n_head_kv=2, extra_kv=_granite_scales("granite"), covers=("GQA 4:1", "untied")
    ),
    "granite-nope-bias": TinySpec(  # rope_finetuned false: no RoPE; optional attention output and FFN biases
        "granite",
        n_head_kv=1,
        output_type=None,
        optional=("attn_output_bias", "ffn_bias"),
        extra_kv={**_granite_scales("granite"), "granite.rope.scaling.finetuned": False},
        covers=("no RoPE", "attention output and FFN biases", "MQA"),
    ),
    "granitemoe-32e-tied": TinySpec(  # granite-3.0-1b-a400m: 32 experts, 8 used, tied
        "granitemoe",
        n_expert=32,
        n_expert_used=8,
        n_ff=32,
        output_type=None,
        extra_kv=_granite_scales("granitemoe"),
        covers=("32 experts, 8 used", "tied"),
    ),
}
