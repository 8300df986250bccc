"""Tiny models of RWKV-6 and RWKV-7 (planner.archs.rwkv; llama_model_rwkv{6,7}::load_arch_tensors)."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    e, w, f32, ff = spec.n_embd, spec.weight_type, Q.F32, spec.n_ff
    p = f"blk.{il}.time_mix_"
    out: Shapes = [
        (f"blk.{il}.{n}.{s}", (e,), f32)
        for n in ("attn_norm", "attn_norm_2", "time_mix_ln")
        for s in ("weight", "bias")
    ]
    out += [(p + n + ".weight", (e, e), w) for n in ("key", "value", "receptance", "output")]
    out += [
        (f"blk.{il}.channel_mix_lerp_k.weight", (e, 1, 1), f32),
        (f"blk.{il}.channel_mix_key.weight", (e, ff), w),
        (f"blk.{il}.channel_mix_value.weight", (ff, e), w),
    ]
    if spec.arch == "rwkv6":
        mix, decay = spec.count("time_mix_extra_dim"), spec.count("time_decay_extra_dim")
        head = spec.count("wkv.head_size")
        return out + [
            (p + "gate.weight", (e, e), w),
            (p + "w1.weight", (e, mix * 5), f32),
            (p + "w2.weight", (mix, e, 5), f32),
            (p + "lerp_x.weight", (e, 1, 1), f32),
            (p + "lerp_fused.weight", (e, 1, 1, 5), f32),
            (p + "first.weight", (head, e // head), f32),
            (p + "decay.weight", (e,), f32),
            (p + "decay_w1.weight", (e, decay), f32),
            (p + "decay_w2.weight", (decay, e), f32),
            (f"blk.{il}.channel_mix_lerp_r.weight", (e, 1, 1), f32),
            (f"blk.{il}.channel_mix_receptance.weight", (e, e), w),
        ]
    ranks = {n: spec.count(f"attention.{n}_lora_rank") for n in ("decay", "iclr", "value_residual_mix", "gate")}
    v_rank = ranks["iclr"] if il == 0 else ranks["value_residual_mix"]
    out += [(p + n + ".weight", (e,), f32) for n in ("w0", "a0", "v0", "k_k", "k_a", "r_k")]
    for n, rank in (("w", ranks["decay"]), ("a", ranks["iclr"]), ("v", v_rank), ("g", ranks["gate"])):
        out += [(p + n + "1.weight", (e, rank), f32), (p + n + "2.weight", (rank, e), f32)]
    return out + [(p + "lerp_fused.weight", (e, 1, 1, 6), f32)]


def global_tensors(spec: TinySpec) -> Shapes:
    return [(f"{n}.{s}", (spec.n_embd,), Q.F32) for n in ("token_embd_norm", "output_norm") for s in ("weight", "bias")]


ZOO: dict[str, TinySpec] = {
    "rwkv6": TinySpec(
        "rwkv6",
        n_head=0,
        n_head_kv=0,
        n_ff=448,
        weight_type=Q.Q8_0,
        extra_kv={
            "rwkv6.wkv.head_size": 32,
            "rwkv6.time_mix_extra_dim": 32,
            "rwkv6.time_decay_extra_dim": 64,
            "rwkv6.rescale_every_n_layers": 2,
            "rwkv6.token_shift_count": 2,
        },
    ),
    "rwkv7": TinySpec(
        "rwkv7",
        n_head=0,
        n_head_kv=0,
        n_ff=512,
        extra_kv={
            "rwkv7.wkv.head_size": 64,
            "rwkv7.attention.decay_lora_rank": 32,
            "rwkv7.attention.iclr_lora_rank": 16,
            "rwkv7.attention.value_residual_mix_lora_rank": 8,
            "rwkv7.attention.gate_lora_rank": 32,
        },
    ),
    # variants along the axes real releases differ in
    "rwkv6-head-64-no-rescale": TinySpec(  # RWKV-6 Finch: 64-wide heads, no rescaling, 3 layers
        "rwkv6",
        n_layer=3,
        n_head=0,
        n_head_kv=0,
        n_ff=448,
        extra_kv={
            "rwkv6.wkv.head_size": 64,
            "rwkv6.time_mix_extra_dim": 32,
            "rwkv6.time_decay_extra_dim": 64,
            "rwkv6.rescale_every_n_layers": 0,
            "rwkv6.token_shift_count": 2,
        },
        covers=("head size 64", "no rescaling", "odd layer count"),
    ),
    "rwkv7-ranks": TinySpec(  # RWKV-7 Goose: LoRA ranks of another size
        "rwkv7",
        n_layer=3,
        n_head=0,
        n_head_kv=0,
        n_ff=512,
        extra_kv={
            "rwkv7.wkv.head_size": 32,
            "rwkv7.attention.decay_lora_rank": 64,
            "rwkv7.attention.iclr_lora_rank": 64,
            "rwkv7.attention.value_residual_mix_lora_rank": 32,
            "rwkv7.attention.gate_lora_rank": 128,
        },
        covers=("head size 32", "LoRA ranks", "odd layer count"),
    ),
}
