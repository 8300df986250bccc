"""Tiny models of SmallThinker (planner.archs.smallthinker): routed experts only, with or without its
4-layer window pattern."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, p, ne, fe = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_expert, spec.n_ff_exp
    return (
        norm(spec, il, "attn_norm")
        + attention(spec, il)
        + norm(spec, il, "ffn_norm")
        + [
            (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
        ]
    )


ZOO: dict[str, TinySpec] = {
    # a window in the header: 4,096 tokens on 3 of every 4 layers (RoPE on those only), sigmoid routing
    "smallthinker": TinySpec(
        "smallthinker",
        n_layer=6,
        n_head_kv=2,
        n_swa=256,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={"smallthinker.expert_gating_func": 2},
    ),
    # no window: RoPE and the full cache on every layer, softmax routing
    "smallthinker-dense": TinySpec(
        "smallthinker",
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        extra_kv={"smallthinker.expert_gating_func": 1},
        name="tiny-smallthinker-dense",
    ),
}
