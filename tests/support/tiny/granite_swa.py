"""Tiny models of Granite with a sliding window (planner.archs.granite_swa): attention sinks, a window
array, an optional rope pattern and deepstack mapping, dense or routed experts with a fused shared expert."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, ff, p = spec.n_embd, spec.weight_type, spec.n_ff, f"blk.{il}."
    out = norm(spec, il, "attn_norm") + attention(spec, il) + [(p + "attn_sinks.weight", (spec.n_head,), Q.F32)]
    out += norm(spec, il, "ffn_norm")
    if not spec.n_expert:
        return out + gated_ffn(spec, il)
    ne, fs = spec.n_expert, spec.n_ff_shexp
    return out + [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "ffn_down_exps.weight", (ff, e, ne), w),
        (p + "ffn_gate_exps.weight", (e, ff, ne), w),
        (p + "ffn_up_exps.weight", (e, ff, ne), w),
        (p + "ffn_up_shexp.weight", (e, 2 * fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
    ]


_SCALES = {"logit_scale": 8.0, "residual_scale": 0.22, "embedding_scale": 12.0, "attention.scale": 0.0078125}

ZOO: dict[str, TinySpec] = {
    # a window on the layers the array names, sinks, every scale, dense FFN; RoPE off on the global layers
    "granite_swa": TinySpec(
        "granite_swa",
        n_layer=5,
        n_head_kv=2,
        n_swa=128,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={
            **{f"granite_swa.{k}": v for k, v in _SCALES.items()},
            "granite_swa.attention.sliding_window_pattern": [True, True, False, True, False],
            "granite_swa.attention.rope_pattern": [1, 1, 0, 1, 0],
        },
    ),
    # routed experts with a fused shared expert, and two deepstack slices added before layers 1 and 2
    "granite_swa-moe": TinySpec(
        "granite_swa",
        n_layer=4,
        n_head_kv=2,
        n_swa=128,
        n_ff=64,
        n_expert=8,
        n_expert_used=2,
        n_ff_shexp=96,
        weight_type=Q.Q8_0,
        extra_kv={
            **{f"granite_swa.{k}": v for k, v in _SCALES.items()},
            "granite_swa.attention.sliding_window_pattern": [True, False, True, False],
            "granite_swa.deepstack_mapping": [-1, 1, 2, -1],
        },
        name="tiny-granite-swa-moe",
    ),
}
