"""Tiny models of MiniCPM3 (planner.archs.minicpm3): low-rank Q and KV projections decompressed into
full heads, in load_arch_tensors' order."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, p, nh = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_head
    q_lora, kv_lora = spec.count("attention.q_lora_rank"), spec.count("attention.kv_lora_rank")
    hk, hv, rope = spec.head_k, kv_lora, spec.count("rope.dimension_count")  # the writer's value length
    gate, up, down = gated_ffn(spec, il)
    return [
        *norm(spec, il, "attn_norm"),
        (p + "attn_q_a_norm.weight", (q_lora,), Q.F32),
        (p + "attn_kv_a_norm.weight", (kv_lora,), Q.F32),
        (p + "attn_q_a.weight", (e, q_lora), w),
        (p + "attn_q_b.weight", (q_lora, nh * hk), w),
        (p + "attn_kv_a_mqa.weight", (e, kv_lora + rope), w),
        (p + "attn_kv_b.weight", (kv_lora, nh * (hk - rope + hv)), w),
        (p + "attn_output.weight", (nh * hv, e), w),
        *norm(spec, il, "ffn_norm"),
        gate,
        down,
        up,
    ]


ZOO: dict[str, TinySpec] = {
    # heads of 96 (64 without RoPE, 32 with), values of 64 (the KV rank: the tiny writer's value length)
    "minicpm3": TinySpec(
        "minicpm3",
        n_head=4,
        n_head_kv=4,
        head_dim=96,
        output_type=None,
        extra_kv={
            "minicpm3.attention.q_lora_rank": 48,
            "minicpm3.attention.kv_lora_rank": 64,
            "minicpm3.rope.dimension_count": 32,
        },
    ),
}
