"""Tiny models of RWKV-6 and RWKV-7 (planner.archs.rwkv; llama_model_rwkv{6,7}::load_arch_tensors)."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, gated_ffn, norm, output_norm


def _qrwkv(spec: TinySpec, il: int) -> Shapes:
    """RWKV6-Qwen2's time mix (grouped K/V, biases, no time_mix_first) and a transformer's FFN."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}.time_mix_"
    mix, decay = spec.count("time_mix_extra_dim"), spec.count("time_decay_extra_dim")
    kv = spec.count("wkv.head_size") * spec.n_head_kv
    gate, up, down = gated_ffn(spec, il)
    return [
        *norm(spec, il, "attn_norm"),
        (p + "w1.weight", (e, mix * 5), f32),
        (p + "w2.weight", (mix, e, 5), f32),
        (p + "lerp_x.weight", (e, 1, 1), f32),
        (p + "lerp_fused.weight", (e, 1, 1, 5), f32),
        (p + "decay.weight", (e,), f32),
        (p + "decay_w1.weight", (e, decay), f32),
        (p + "decay_w2.weight", (decay, e), f32),
        (p + "key.weight", (e, kv), w),
        (p + "value.weight", (e, kv), w),
        (p + "receptance.weight", (e, e), w),
        (p + "gate.weight", (e, e), w),
        (p + "key.bias", (kv,), f32),
        (p + "value.bias", (kv,), f32),
        (p + "receptance.bias", (e,), f32),
        (p + "output.weight", (e, e), w),
        *norm(spec, il, "ffn_norm"),
        gate,
        down,
        up,
    ]


def _arwkv7(spec: TinySpec, il: int) -> Shapes:
    """ARWKV-7's time mix (RWKV-7's, without the gate here) and a transformer's FFN."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}.time_mix_"
    ranks = {n: spec.count(f"attention.{n}_lora_rank") for n in ("decay", "iclr", "value_residual_mix")}
    v_rank = ranks["iclr"] if il == 0 else ranks["value_residual_mix"]
    out = norm(spec, il, "attn_norm")
    for n, rank in (("w", ranks["decay"]), ("a", ranks["iclr"]), ("v", v_rank)):
        out += [
            (p + n + "0.weight", (e,), f32),
            (p + n + "1.weight", (e, rank), f32),
            (p + n + "2.weight", (rank, e), f32),
        ]
    out += [(p + "lerp_fused.weight", (e, 1, 1, 5), f32)]
    out += [(p + n + ".weight", (e,), f32) for n in ("k_k", "k_a", "r_k")]
    out += [(p + n + ".weight", (e, e), w) for n in ("key", "value", "receptance")]
    out += [(p + "ln.weight", (e,), f32), (p + "ln.bias", (e,), f32), (p + "output.weight", (e, e), w)]
    gate, up, down = gated_ffn(spec, il)
    return out + norm(spec, il, "ffn_norm") + [gate, down, up]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    if spec.arch == "rwkv6qwen2":
        return _qrwkv(spec, il)
    if spec.arch == "arwkv7":
        return _arwkv7(spec, il)
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
    if spec.arch in ("rwkv6qwen2", "arwkv7"):
        return output_norm(spec)
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
    # QRWKV 6: 4 heads of 32 sharing 2 K/V heads, one token shift, RMS norms and a SwiGLU FFN
    "rwkv6qwen2": TinySpec(
        "rwkv6qwen2",
        n_head=4,
        n_head_kv=2,
        extra_kv={
            "rwkv6qwen2.wkv.head_size": 32,
            "rwkv6qwen2.time_mix_extra_dim": 32,
            "rwkv6qwen2.time_decay_extra_dim": 64,
            "rwkv6qwen2.token_shift_count": 1,
        },
    ),
    "arwkv7": TinySpec(
        "arwkv7",
        n_head=0,
        n_head_kv=0,
        extra_kv={
            "arwkv7.wkv.head_size": 64,
            "arwkv7.attention.decay_lora_rank": 32,
            "arwkv7.attention.iclr_lora_rank": 16,
            "arwkv7.attention.value_residual_mix_lora_rank": 8,
            "arwkv7.token_shift_count": 1,
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
