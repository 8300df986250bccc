"""Tiny models of Hunyuan dense, Hunyuan VL, Hunyuan MoE and Maincoder (planner.archs.hunyuan): llama's
layers with per-head Q/K norms; Hunyuan MoE's routed experts beside a shared expert."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, gated_ffn, norm, output_norm, qk_norm_attention

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    attn = norm(spec, il, "attn_norm") + qk_norm_attention(spec, il) + norm(spec, il, "ffn_norm")
    if spec.arch != "hunyuan-moe":
        return attn + gated_ffn(spec, il)
    # the experts are feed_forward_length wide; the shared expert too unless the header says otherwise
    e, w, p, ne, ff = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_expert, spec.n_ff
    fs = spec.n_ff_shexp or ff
    return attn + [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "ffn_gate_exps.weight", (e, ff, ne), w),
        (p + "ffn_down_exps.weight", (ff, e, ne), w),
        (p + "ffn_up_exps.weight", (e, ff, ne), w),
        (p + "ffn_gate_shexp.weight", (e, fs), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
    ]


ZOO: dict[str, TinySpec] = {
    # per-head Q/K norms after RoPE; an expert count of 1 means no experts
    "hunyuan-dense": TinySpec(
        "hunyuan-dense",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={"hunyuan-dense.expert_count": 1, "hunyuan-dense.expert_used_count": 1},
    ),
    # Hunyuan VL's text model: the same layers, multi-section RoPE (four positions a token), tied output
    "hunyuan_vl": TinySpec(
        "hunyuan_vl",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={"hunyuan_vl.rope.dimension_sections": [8, 4, 4, 0]},
    ),
    "hunyuan_vl-norope-sections": TinySpec("hunyuan_vl", n_head_kv=4, name="tiny-hunyuan-vl-neox"),
    # softmax-routed experts (feed_forward_length wide) and a narrower shared expert, summed
    "hunyuan-moe": TinySpec(
        "hunyuan-moe",
        n_head_kv=2,
        n_ff=64,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=96,
        weight_type=Q.Q8_0,
        extra_kv={"hunyuan-moe.expert_weights_scale": 2.5},  # read by no Hunyuan MoE loader: no scale node
    ),
    # Maincoder: Q's norm before K's, both after RoPE
    "maincoder": TinySpec("maincoder", n_head_kv=2, output_type=None),
    # variants along the axes real releases differ in
    "hunyuan-dense-untied-no-expert-keys": TinySpec(  # Hunyuan 0.5B-7B: no expert keys at all; untied
        "hunyuan-dense", n_head_kv=1, head_dim=64, covers=("no expert keys", "untied", "MQA", "head size")
    ),
}
