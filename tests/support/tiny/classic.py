"""Tiny models of the pre-norm decoders llama.cpp builds from one template (planner.archs.classic):
each architecture's tensors in its loader's order (src/models/<arch>.cpp, load_arch_tensors)."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import (
    Shapes,
    TinySpec,
    attn_output,
    fused_qkv,
    gated_ffn,
    norm,
    output_norm,
    qkv,
    qkv_biases,
)

_LAYER_NORMS = ("bloom", "mpt", "gptneox", "codeshell", "jais", "jais2", "nemotron")


def _has(spec: TinySpec, option: str) -> bool:
    """A variant's optional tensors, named in its spec's name ("tiny mpt qk-norm ...")."""
    return option in spec.name.split()


def _bias(spec: TinySpec, il: int, name: str, n: int) -> Shapes:
    return [(f"blk.{il}.{name}.bias", (n,), Q.F32)]


def _ungated_biased(spec: TinySpec, il: int, down_first: bool = True) -> Shapes:
    """up and down with their biases, in the loader's order (down first in the GPT-2 lineage)."""
    e, w, p, ff = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_ff
    down: Shapes = [(p + "ffn_down.weight", (ff, e), w), (p + "ffn_down.bias", (e,), Q.F32)]
    up: Shapes = [(p + "ffn_up.weight", (e, ff), w), (p + "ffn_up.bias", (ff,), Q.F32)]
    return down + up if down_first else up + down


def _gate_down_up(spec: TinySpec, il: int, ff: int | None = None) -> Shapes:
    """A gated FFN in the order gate, down, up (baichuan, refact, qwen, plamo, openelm)."""
    gate, up, down = gated_ffn(spec, il, ff)
    return [gate, down, up]


def _openelm(spec: TinySpec, il: int) -> Shapes:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    n_head = spec.q_heads[il] if spec.q_heads else spec.n_head
    n_kv = spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    ff = spec.ff_lengths[il] if spec.ff_lengths else spec.n_ff
    return [
        *norm(spec, il, "attn_norm"),
        (p + "attn_qkv.weight", (e, (n_head + 2 * n_kv) * hk), w),
        (p + "attn_q_norm.weight", (hk,), Q.F32),
        (p + "attn_k_norm.weight", (hk,), Q.F32),
        (p + "attn_output.weight", (n_head * hk, e), w),
        *norm(spec, il, "ffn_norm"),
        *_gate_down_up(spec, il, ff),
    ]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    a, e, w, p = spec.arch, spec.n_embd, spec.weight_type, f"blk.{il}."
    if a == "openelm":
        return _openelm(spec, il)
    biased_norms = a in _LAYER_NORMS and (a != "mpt" or _has(spec, "biases"))
    out = norm(spec, il, "attn_norm", bias=biased_norms)
    if a in ("bloom", "gptneox", "jais", "codeshell", "qwen", "chatglm"):
        out += fused_qkv(spec, il, bias=True)
    elif a == "mpt":
        out += fused_qkv(spec, il)
    else:
        out += qkv(spec, il)
        if a == "jais2":
            out += qkv_biases(spec, il)
    out += attn_output(spec, il)
    if a in ("bloom", "gptneox", "jais", "codeshell", "jais2", "nemotron"):
        out += _bias(spec, il, "attn_output", e)
    if a == "plamo":  # no FFN norm: the FFN reads the attention's
        return out + _gate_down_up(spec, il)
    out += norm(spec, il, "ffn_norm", bias=biased_norms)
    if a in ("bloom", "gptneox", "codeshell"):
        return out + _ungated_biased(spec, il)
    if a == "mpt":
        out += [(p + "ffn_down.weight", (spec.n_ff, e), w), (p + "ffn_up.weight", (e, spec.n_ff), w)]
        if _has(spec, "qk-norm"):
            out += norm(spec, il, "attn_q_norm", bias=True)
            out += [(p + "attn_k_norm.weight", (spec.head_k * spec.n_head_kv,), Q.F32)]
            out += [(p + "attn_k_norm.bias", (spec.head_k * spec.n_head_kv,), Q.F32)]
        return out
    if a == "jais":
        ff = spec.n_ff
        return out + [
            (p + "ffn_down.weight", (ff, e), w),
            (p + "ffn_down.bias", (e,), Q.F32),
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_gate.bias", (ff,), Q.F32),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_up.bias", (ff,), Q.F32),
        ]
    if a == "jais2":
        return out + _ungated_biased(spec, il, down_first=False)
    if a == "nemotron":
        return out + [(p + "ffn_down.weight", (spec.n_ff, e), w), (p + "ffn_up.weight", (e, spec.n_ff), w)]
    if a == "chatglm":
        return out + [(p + "ffn_up.weight", (e, 2 * spec.n_ff), w), (p + "ffn_down.weight", (spec.n_ff, e), w)]
    if a == "qwen":
        return out + _gate_down_up(spec, il, spec.n_ff // 2)
    return out + _gate_down_up(spec, il)  # baichuan, refact


def global_tensors(spec: TinySpec) -> Shapes:
    a, e = spec.arch, spec.n_embd
    out: Shapes = []
    if a == "bloom":
        out += [("token_embd_norm.weight", (e,), Q.F32), ("token_embd_norm.bias", (e,), Q.F32)]
    if a == "mpt" and _has(spec, "positions"):
        out += [("position_embd.weight", (e, spec.n_ctx_train), Q.F32)]
    biased = a in _LAYER_NORMS and (a != "mpt" or _has(spec, "biases"))
    return out + output_norm(spec, bias=biased)


def _ln(arch: str) -> dict[str, object]:
    return {f"{arch}.attention.layer_norm_epsilon": 1e-5}


ZOO: dict[str, TinySpec] = {
    # Baichuan 2 13B's shape (ALiBi, no positions) and the 7B's (32 layers, RoPE)
    "baichuan": TinySpec("baichuan", n_head_kv=4, weight_type=Q.Q8_0),
    "baichuan-7b": TinySpec("baichuan", n_layer=32, n_embd=64, n_head=4, n_head_kv=4, n_ff=128),
    "refact": TinySpec("refact", n_head_kv=1, output_type=None),
    "bloom": TinySpec("bloom", n_head_kv=4, output_type=None, extra_kv=_ln("bloom")),
    "mpt": TinySpec(
        "mpt",
        n_head_kv=4,
        output_type=None,
        extra_kv={**_ln("mpt"), "mpt.attention.clamp_kqv": 8.0, "mpt.attention.max_alibi_bias": 8.0},
    ),
    "mpt-positions": TinySpec(
        "mpt",
        n_head_kv=4,
        name="tiny mpt biases positions",
        extra_kv=_ln("mpt"),
    ),
    "gptneox": TinySpec("gptneox", n_head_kv=4, extra_kv={**_ln("gptneox"), "gptneox.use_parallel_residual": True}),
    "gptneox-sequential": TinySpec(
        "gptneox", n_head_kv=4, extra_kv={**_ln("gptneox"), "gptneox.use_parallel_residual": False}
    ),
    "qwen": TinySpec("qwen", n_head_kv=4, n_ff=512, weight_type=Q.Q8_0),
    "codeshell": TinySpec("codeshell", n_head_kv=1, extra_kv=_ln("codeshell")),
    "jais": TinySpec("jais", n_head_kv=4, extra_kv={**_ln("jais"), "jais.attention.max_alibi_bias": 8.0}),
    "jais2": TinySpec("jais2", n_head_kv=2, output_type=None, extra_kv=_ln("jais2")),
    "nemotron": TinySpec("nemotron", n_head_kv=2, extra_kv=_ln("nemotron")),
    "plamo": TinySpec("plamo", n_head_kv=4),
    "chatglm": TinySpec("chatglm", n_head_kv=2, output_type=None),
    # OpenELM: heads, KV heads and FFN widths that grow layer by layer, tied output
    "openelm": TinySpec(
        "openelm",
        head_dim=32,
        q_heads=(4, 4, 6, 8),
        kv_heads=(1, 1, 2, 2),
        ff_lengths=(128, 192, 256, 320),
        output_type=None,
    ),
}
