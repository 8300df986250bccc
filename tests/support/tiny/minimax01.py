"""Tiny models of MiniMax-Text-01 (planner.archs.minimax01): lightning-attention layers (a fused QKV, a
second norm and an output gate) and softmax attention layers, softmax-routed experts on every layer."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attn_output, norm, output_norm, qkv

global_tensors = output_norm


def _recurrent(spec: TinySpec, il: int) -> bool:
    layers = spec.extra_kv.get(f"{spec.arch}.attention.recurrent_layers")
    if isinstance(layers, list):
        return bool(layers[il])
    return (il + 1) % spec.count("full_attention_interval", 8) != 0


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, p, inner = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.head_k * spec.n_head
    out = norm(spec, il, "attn_norm")
    if _recurrent(spec, il):
        out += [
            (p + "attn_norm_2.weight", (inner,), Q.F32),
            (p + "attn_qkv.weight", (e, 3 * inner), w),
            (p + "attn_gate.weight", (e, inner), w),
        ]
    else:
        out += qkv(spec, il)
    ne, ff = spec.n_expert, spec.n_ff
    return (
        out
        + attn_output(spec, il)
        + norm(spec, il, "ffn_norm")
        + [
            (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
            (p + "ffn_gate_exps.weight", (e, ff, ne), w),
            (p + "ffn_down_exps.weight", (ff, e, ne), w),
            (p + "ffn_up_exps.weight", (e, ff, ne), w),
        ]
    )


ZOO: dict[str, TinySpec] = {
    # every 4th layer softmax attention, the others lightning attention; 8 experts (2 used), 64 wide
    "minimax-01": TinySpec(
        "minimax-01",
        n_layer=4,
        n_head_kv=4,
        n_ff=64,
        n_expert=8,
        n_expert_used=2,
        weight_type=Q.Q8_0,
        extra_kv={"minimax-01.residual_scale": 1.55, "minimax-01.full_attention_interval": 4},
    ),
}
