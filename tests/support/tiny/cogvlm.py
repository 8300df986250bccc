"""Tiny models of CogVLM's language model (planner.archs.cogvlm): a fused QKV and a visual expert's copy
of the attention and FFN weights."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, ff, p = spec.n_embd, spec.weight_type, spec.n_ff, f"blk.{il}."
    qkv = spec.head_k * spec.n_head * 3
    return norm(spec, il, "attn_norm") + [
        (p + "attn_qkv.weight", (e, qkv), w),
        (p + "attn_output.weight", (e, e), w),
        (p + "vis_attn_qkv.weight", (e, qkv), w),
        (p + "vis_attn_output.weight", (e, e), w),
        *norm(spec, il, "ffn_norm"),
        (p + "ffn_gate.weight", (e, ff), w),
        (p + "ffn_down.weight", (ff, e), w),
        (p + "ffn_up.weight", (e, ff), w),
        (p + "vis_gate.weight", (e, ff), w),
        (p + "vis_down.weight", (ff, e), w),
        (p + "vis_up.weight", (e, ff), w),
    ]


ZOO: dict[str, TinySpec] = {
    # CogVLM 2's text model in small: full multi-head attention, untied output
    "cogvlm": TinySpec("cogvlm", n_head_kv=4, weight_type=Q.Q8_0),
}
