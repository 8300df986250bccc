"""Tiny models of Phi-3 (planner.archs.phi3): a fused QKV projection, a fused gate/up FFN."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attn_output, experts, fused_ffn, fused_qkv, norm, output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    attn = fused_qkv(spec, il) + attn_output(spec, il)
    if spec.arch == "phimoe":  # layer norms and the output projection with biases, then the experts
        bias = [(f"blk.{il}.attn_output.bias", (spec.n_embd,), Q.F32)]
        gate_inp, gate, up, down = experts(spec, il, spec.n_ff)
        ffn = [gate_inp, gate, down, up]
        return norm(spec, il, "attn_norm", True) + attn + bias + norm(spec, il, "ffn_norm", True) + ffn
    return norm(spec, il, "attn_norm") + attn + norm(spec, il, "ffn_norm") + fused_ffn(spec, il)


def global_tensors(spec: TinySpec) -> Shapes:
    if spec.arch == "phimoe":
        return output_norm(spec, bias=True) + [("output.bias", (spec.n_vocab,), Q.F32)]
    return output_norm(spec)


def header_kv(spec: TinySpec) -> dict[str, object]:
    """RoPE over the whole head."""
    return {f"{spec.arch}.rope.dimension_count": spec.head_k}


ZOO: dict[str, TinySpec] = {
    "phi3": TinySpec("phi3", n_head_kv=4, weight_type=Q.Q8_0),
    # Phi-3.5-MoE's shape: 8 experts, 2 used, biased layer norms and output
    "phimoe": TinySpec("phimoe", n_head_kv=2, n_expert=8, n_expert_used=2, n_ff=64),
}
