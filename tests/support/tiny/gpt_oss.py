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
}
