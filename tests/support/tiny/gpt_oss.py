"""Tiny models of gpt-oss (planner.archs.gpt_oss): attention sinks, biases everywhere, SwiGLU-OAI experts."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, biased_attention, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    ne, fe = spec.n_expert, spec.n_ff_exp
    attn = biased_attention(spec, il)
    attn += [(p + "attn_output.bias", (e,), f32), (p + "attn_sinks.weight", (spec.n_head,), f32)]
    return [
        *norm(spec, il, "attn_norm"),
        *attn,
        *norm(spec, il, "post_attention_norm"),
        (p + "ffn_gate_inp.weight", (e, ne), f32),
        (p + "ffn_gate_inp.bias", (ne,), f32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_gate_exps.bias", (fe, ne), f32),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_up_exps.bias", (fe, ne), f32),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_down_exps.bias", (e, ne), f32),
    ]


ZOO: dict[str, TinySpec] = {
    "gpt-oss": TinySpec(
        "gpt-oss", n_expert=4, n_expert_used=2, n_ff_exp=64, head_dim=64, n_swa=128, weight_type=Q.MXFP4, n_vocab=1024
    ),
    # variants along the axes real releases differ in
    "gpt-oss-20b-shape": TinySpec(  # 20B: 32 experts, 4 used, 64 query heads over 8; here 5 layers
        "gpt-oss",
        n_layer=5,
        n_head=8,
        n_head_kv=1,
        n_expert=32,
        n_expert_used=4,
        n_ff_exp=32,
        head_dim=64,
        n_swa=128,
        weight_type=Q.MXFP4,
        n_vocab=1024,
        covers=("32 experts, 4 used", "GQA 8:1", "odd layer count: last layer sliding"),
    ),
    "gpt-oss-window-1024": TinySpec(
        "gpt-oss",
        n_layer=4,
        n_head=4,
        n_head_kv=4,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=32,
        head_dim=32,
        n_swa=1024,
        weight_type=Q.MXFP4,
        n_vocab=1024,
        covers=("window 1,024", "MHA", "head size 32"),
    ),
}
