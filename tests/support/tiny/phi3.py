"""Tiny models of Phi-3 (planner.archs.phi3): a fused QKV projection, a fused gate/up FFN."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attn_output, fused_ffn, fused_qkv, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    attn = fused_qkv(spec, il) + attn_output(spec, il)
    return norm(spec, il, "attn_norm") + attn + norm(spec, il, "ffn_norm") + fused_ffn(spec, il)


def header_kv(spec: TinySpec) -> dict[str, object]:
    """RoPE over the whole head."""
    return {f"{spec.arch}.rope.dimension_count": spec.head_k}


ZOO: dict[str, TinySpec] = {
    "phi3": TinySpec("phi3", n_head_kv=4, weight_type=Q.Q8_0),
}
