"""Tiny models of Talkie (planner.archs.talkie): no norm weights but Q's per-head scale, a layer-output
scale on the embedding skip, an untied output matrix and no output norm."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention


def global_tensors(spec: TinySpec) -> Shapes:
    return []  # the final norm has no weight


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, ff, p = spec.n_embd, spec.weight_type, spec.n_ff, f"blk.{il}."
    return attention(spec, il) + [
        (p + "attn_q_norm.weight", (1, spec.n_head), Q.F32),
        (p + "ffn_gate.weight", (e, ff), w),
        (p + "ffn_up.weight", (e, ff), w),
        (p + "ffn_down.weight", (ff, e), w),
        (p + "layer_output_scale.weight", (1,), Q.F32),
    ]


ZOO: dict[str, TinySpec] = {
    "talkie": TinySpec("talkie", n_head_kv=2, weight_type=Q.Q8_0, extra_kv={"talkie.logit_scale": 0.5}),
}
