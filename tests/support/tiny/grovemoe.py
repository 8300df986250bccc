"""Tiny models of GroveMoE (planner.archs.grovemoe): Qwen3-MoE's layers plus the groups' chunk experts."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, p, ne, fe, hk = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_expert, spec.n_ff_exp, spec.head_k
    fc, nc = spec.count("expert_chunk_feed_forward_length"), ne // spec.count("experts_per_group")
    return (
        norm(spec, il, "attn_norm")
        + attention(spec, il)
        + [(p + "attn_k_norm.weight", (hk,), Q.F32), (p + "attn_q_norm.weight", (hk,), Q.F32)]
        + norm(spec, il, "ffn_norm")
        + [
            (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "ffn_gate_chexps.weight", (e, fc, nc), w),
            (p + "ffn_down_chexps.weight", (fc, e, nc), w),
            (p + "ffn_up_chexps.weight", (e, fc, nc), w),
        ]
    )


ZOO: dict[str, TinySpec] = {
    # 16 experts in groups of 2 (as the 30B-A3B: 128 in groups of 2), 4 used: 8 chunk experts, 4 used
    "grovemoe": TinySpec(
        "grovemoe",
        n_head_kv=2,
        n_expert=16,
        n_expert_used=4,
        n_ff_exp=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "grovemoe.expert_chunk_feed_forward_length": 32,
            "grovemoe.expert_group_scale": 0.05,
            "grovemoe.experts_per_group": 2,
        },
    ),
}
