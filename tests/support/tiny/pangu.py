"""Tiny models of openPangu-Embedded (planner.archs.pangu): llama's layers with an output-projection bias."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attn_output, gated_ffn, norm, output_norm, qkv

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    out = norm(spec, il, "attn_norm") + qkv(spec, il) + attn_output(spec, il)
    out.append((f"blk.{il}.attn_output.bias", (spec.n_embd,), Q.F32))
    return out + norm(spec, il, "ffn_norm") + gated_ffn(spec, il)


ZOO: dict[str, TinySpec] = {
    # the 1B's shape: grouped-query attention, an output-projection bias, tied output
    "pangu-embedded": TinySpec("pangu-embedded", n_head_kv=2, weight_type=Q.Q8_0, output_type=None),
}
