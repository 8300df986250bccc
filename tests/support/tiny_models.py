"""Tiny GGUF models, written with gguf.GGUFWriter, that real llama.cpp can load.

Weights are random (quantized types get random blocks with sane scales), the
vocabulary is a small SentencePiece-style list with byte tokens. Each
architecture gets the tensors and metadata its llama.cpp loader asks for.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

# Byte offsets of the f16 scale fields in each block, set to a small value so
# random blocks dequantize to finite numbers.
_F16_FIELDS: dict[Q, tuple[int, ...]] = {
    Q.Q4_K: (0, 2),
    Q.Q5_K: (0, 2),
    Q.Q6_K: (208,),
    Q.Q2_K: (80, 82),
    Q.Q3_K: (108,),
    Q.IQ4_NL: (0,),
    Q.IQ4_XS: (0,),
    Q.Q8_0: (0,),
    Q.Q4_0: (0,),
    Q.Q4_1: (0, 2),
    Q.Q5_0: (0,),
    Q.Q5_1: (0, 2),
}
_SMALL_F16 = np.float16(0.01).tobytes()


@dataclass
class TinySpec:
    arch: str = "llama"
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int | None = None  # key/value length when it differs from n_embd / n_head
    n_ff: int = 256
    n_vocab: int = 512
    n_ctx_train: int = 8192
    weight_type: Q = Q.F16  # matrices in the repeating layers
    embd_type: Q = Q.F16
    output_type: Q | None = Q.F16  # None: tied to the token embeddings
    n_swa: int = 0
    swa_pattern: int = 0
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    # per-layer KV heads (0 marks a recurrent layer in the hybrids)
    kv_heads: tuple[int, ...] = ()
    # per-layer feed-forward sizes (Nemotron-H: 0 outside the feed-forward-only layers)
    ff_lengths: tuple[int, ...] = ()
    # per-layer query heads (PLaMo-2 writes 0 at its Mamba layers)
    q_heads: tuple[int, ...] = ()
    name: str = ""
    extra_kv: dict[str, object] = field(default_factory=dict)
    # the end-of-generation tokens (</s>, <|endoftext|>) get a zero row in the output matrix, so that
    # the model practically never ends a reply by itself (for tests that need a long stream)
    never_ends: bool = False

    def with_(self, **changes: object) -> TinySpec:
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def head_k(self) -> int:
        return self.head_dim or (self.n_embd // self.n_head if self.n_head else 0)


def _block_bytes(t: Q) -> tuple[int, int]:
    block, size = gguf.GGML_QUANT_SIZES[t]
    return block, size


def _random_tensor(rng: np.random.Generator, shape: tuple[int, ...], t: Q) -> tuple[np.ndarray, Q | None]:
    """Data for a tensor of ggml shape `shape` (ne order) in type t."""
    np_shape = tuple(reversed(shape))
    if t == Q.F32:
        return (rng.standard_normal(np_shape) * 0.02).astype(np.float32), None
    if t == Q.F16:
        return (rng.standard_normal(np_shape) * 0.02).astype(np.float16), None
    block, size = _block_bytes(t)
    n_rows = int(np.prod(np_shape[:-1])) if len(np_shape) > 1 else 1
    row_bytes = shape[0] // block * size
    raw = rng.integers(0, 256, size=(n_rows, shape[0] // block, size), dtype=np.uint8)
    for offset in _F16_FIELDS.get(t, ()):
        raw[:, :, offset : offset + 2] = np.frombuffer(_SMALL_F16, dtype=np.uint8)
    raw = raw.reshape(*np_shape[:-1], row_bytes)
    return raw, t


def _vocab(n_vocab: int) -> tuple[list[bytes], list[float], list[int]]:
    tokens = [b"<unk>", b"<s>", b"</s>", b"<|endoftext|>"]
    types = [2, 3, 3, 3]
    tokens += [f"<0x{i:02X}>".encode() for i in range(256)]
    types += [6] * 256
    i = 0
    while len(tokens) < n_vocab:
        tokens.append(f"\u2581w{i}".encode())
        types.append(1)
        i += 1
    tokens = tokens[:n_vocab]
    types = types[:n_vocab]
    scores = [-float(i) for i in range(n_vocab)]
    return tokens, scores, types


def _deepseek2_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    x = spec.extra_kv
    e, w, f32 = spec.n_embd, spec.weight_type, Q.F32
    a = spec.arch
    kv_lora, q_lora = x[f"{a}.attention.kv_lora_rank"], x[f"{a}.attention.q_lora_rank"]
    hk, hv = x[f"{a}.attention.key_length_mla"], x[f"{a}.attention.value_length_mla"]
    rope = x[f"{a}.rope.dimension_count"]
    nope, nh = hk - rope, spec.n_head
    p = f"blk.{il}."
    out = [
        (p + "attn_norm.weight", (e,), f32),
        (p + "attn_q_a_norm.weight", (q_lora,), f32),
        (p + "attn_kv_a_norm.weight", (kv_lora,), f32),
        (p + "attn_q_a.weight", (e, q_lora), w),
        (p + "attn_q_b.weight", (q_lora, nh * hk), w),
        (p + "attn_kv_a_mqa.weight", (e, kv_lora + rope), w),
        (p + "attn_k_b.weight", (nope, kv_lora, nh), Q.F16),
        (p + "attn_v_b.weight", (kv_lora, hv, nh), Q.F16),
        (p + "attn_output.weight", (nh * hv, e), w),
        (p + "ffn_norm.weight", (e,), f32),
    ]
    if a == "deepseek32":
        out += _dsa_indexer(spec, il)
    if il < x[f"{a}.leading_dense_block_count"]:
        return out + [
            (p + "ffn_gate.weight", (e, spec.n_ff), w),
            (p + "ffn_up.weight", (e, spec.n_ff), w),
            (p + "ffn_down.weight", (spec.n_ff, e), w),
        ]
    ne, fe, ns = spec.n_expert, spec.n_ff_exp, x[f"{a}.expert_shared_count"]
    out += [
        (p + "ffn_gate_inp.weight", (e, ne), f32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_gate_shexp.weight", (e, fe * ns), w),
        (p + "ffn_up_shexp.weight", (e, fe * ns), w),
        (p + "ffn_down_shexp.weight", (fe * ns, e), w),
    ]
    if x.get(f"{a}.expert_gating_func") == 2:
        out.append((p + "exp_probs_b.bias", (ne,), f32))
    if il >= spec.n_layer - x.get(f"{a}.nextn_predict_layers", 0):
        out += [
            (p + "nextn.eh_proj.weight", (2 * e, e), w),
            (p + "nextn.enorm.weight", (e,), f32),
            (p + "nextn.hnorm.weight", (e,), f32),
            (p + "nextn.shared_head_norm.weight", (e,), f32),
        ]
    return out


def _dsa_indexer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """DeepSeek V3.2's lightning indexer (llama_model_deepseek32::load_arch_tensors)."""
    x, a, e, w, p = spec.extra_kv, spec.arch, spec.n_embd, spec.weight_type, f"blk.{il}."
    n_head, head = x[f"{a}.attention.indexer.head_count"], x[f"{a}.attention.indexer.key_length"]
    return [
        (p + "indexer.k_norm.weight", (head,), Q.F32),
        (p + "indexer.k_norm.bias", (head,), Q.F32),
        (p + "indexer.proj.weight", (e, n_head), Q.F32),
        (p + "indexer.attn_k.weight", (e, head), w),
        (p + "indexer.attn_q_b.weight", (x[f"{a}.attention.q_lora_rank"], n_head * head), w),
    ]


def _ssm_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """Mamba / Mamba-2 layer tensors (llama_model_mamba*::load_arch_tensors)."""
    x, a = spec.extra_kv, spec.arch
    e, w, f32 = spec.n_embd, spec.weight_type, Q.F32
    d_conv, d_inner, d_state = x[f"{a}.ssm.conv_kernel"], x[f"{a}.ssm.inner_size"], x[f"{a}.ssm.state_size"]
    dt_rank = x[f"{a}.ssm.time_step_rank"]
    p = f"blk.{il}."
    out = [(p + "attn_norm.weight", (e,), f32)]
    if a in ("mamba", "jamba"):  # Mamba-1; Mamba-2 and the hybrids' SSM layers follow below
        if a == "jamba":  # RMS norms on dt, B and C
            out += [
                (p + "ssm_dt_norm.weight", (dt_rank,), f32),
                (p + "ssm_b_norm.weight", (d_state,), f32),
                (p + "ssm_c_norm.weight", (d_state,), f32),
            ]
        return out + [
            (p + "ssm_in.weight", (e, 2 * d_inner), w),
            (p + "ssm_conv1d.weight", (d_conv, d_inner), f32),
            (p + "ssm_conv1d.bias", (d_inner,), f32),
            (p + "ssm_x.weight", (d_inner, dt_rank + 2 * d_state), w),
            (p + "ssm_dt.weight", (dt_rank, d_inner), w),
            (p + "ssm_dt.bias", (d_inner,), f32),
            (p + "ssm_a", (d_state, d_inner), f32),
            (p + "ssm_d", (d_inner,), f32),
            (p + "ssm_out.weight", (d_inner, e), w),
        ]
    n_group = x[f"{a}.ssm.group_count"]
    conv_dim = d_inner + 2 * n_group * d_state
    return out + [
        (p + "ssm_in.weight", (e, d_inner + conv_dim + dt_rank), w),
        (p + "ssm_conv1d.weight", (d_conv, conv_dim), f32),
        (p + "ssm_conv1d.bias", (conv_dim,), f32),
        (p + "ssm_dt.bias", (dt_rank,), f32),
        (p + "ssm_a", (1, dt_rank), f32),
        (p + "ssm_d", (1, dt_rank), f32),
        (p + "ssm_norm.weight", (d_inner // n_group, n_group), f32),
        (p + "ssm_out.weight", (d_inner, e), w),
    ]


def _hybrid_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """LFM2, Granite-hybrid and Jamba layers: a recurrent block where the layer has no KV heads."""
    e, w, f32, a = spec.n_embd, spec.weight_type, Q.F32, spec.arch
    p = f"blk.{il}."
    kv = spec.kv_heads[il]
    hk = spec.head_k
    out: list[tuple[str, tuple[int, ...], Q]] = [
        (p + "attn_norm.weight", (e,), f32),
        (p + "ffn_norm.weight", (e,), f32),
    ]
    if kv == 0:
        if a in ("lfm2", "lfm2moe"):
            l_cache = spec.extra_kv[f"{a}.shortconv.l_cache"]
            out += [
                (p + "shortconv.conv.weight", (l_cache, e), f32),
                (p + "shortconv.in_proj.weight", (e, 3 * e), w),
                (p + "shortconv.out_proj.weight", (e, e), w),
            ]
        else:
            out += [t for t in _ssm_layer(spec, il) if "attn_norm" not in t[0]]
    else:
        out += [
            (p + "attn_q.weight", (e, hk * spec.n_head), w),
            (p + "attn_k.weight", (e, hk * kv), w),
            (p + "attn_v.weight", (e, hk * kv), w),
            (p + "attn_output.weight", (hk * spec.n_head, e), w),
        ]
        if a in ("lfm2", "lfm2moe"):
            out += [(p + "attn_q_norm.weight", (hk,), f32), (p + "attn_k_norm.weight", (hk,), f32)]
    if a == "lfm2moe" and il >= spec.extra_kv.get("lfm2moe.leading_dense_block_count", 0):
        ne, fe = spec.n_expert, spec.n_ff_exp
        return out + [
            (p + "ffn_gate_inp.weight", (e, ne), f32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "exp_probs_b.bias", (ne,), f32),
        ]
    if a == "jamba" and spec.n_expert and il % 2 == 1:  # experts on every other layer
        ne, ff = spec.n_expert, spec.n_ff
        return out + [
            (p + "ffn_gate_inp.weight", (e, ne), f32),
            (p + "ffn_gate_exps.weight", (e, ff, ne), w),
            (p + "ffn_up_exps.weight", (e, ff, ne), w),
            (p + "ffn_down_exps.weight", (ff, e, ne), w),
        ]
    out += [
        (p + "ffn_gate.weight", (e, spec.n_ff), w),
        (p + "ffn_up.weight", (e, spec.n_ff), w),
        (p + "ffn_down.weight", (spec.n_ff, e), w),
    ]
    return out


def _rwkv_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """RWKV-6 / RWKV-7 layer tensors (llama_model_rwkv{6,7}::load_arch_tensors)."""
    x, a = spec.extra_kv, spec.arch
    e, w, f32, ff = spec.n_embd, spec.weight_type, Q.F32, spec.n_ff
    p = f"blk.{il}.time_mix_"
    out = [
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
    if a == "rwkv6":
        mix, decay, head = x["rwkv6.time_mix_extra_dim"], x["rwkv6.time_decay_extra_dim"], x["rwkv6.wkv.head_size"]
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
    ranks = {n: x[f"rwkv7.attention.{n}_lora_rank"] for n in ("decay", "iclr", "value_residual_mix", "gate")}
    v_rank = ranks["iclr"] if il == 0 else ranks["value_residual_mix"]
    out += [(p + n + ".weight", (e,), f32) for n in ("w0", "a0", "v0", "k_k", "k_a", "r_k")]
    for n, rank in (("w", ranks["decay"]), ("a", ranks["iclr"]), ("v", v_rank), ("g", ranks["gate"])):
        out += [(p + n + "1.weight", (e, rank), f32), (p + n + "2.weight", (rank, e), f32)]
    return out + [(p + "lerp_fused.weight", (e, 1, 1, 6), f32)]


def _qwen3next_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """Qwen3-Next layers (llama_model_qwen3next::load_arch_tensors): gated delta-net layers and every
    `full_attention_interval`-th layer gated full attention; routed experts plus a gated shared expert."""
    x, a = spec.extra_kv, spec.arch
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    out = [(p + "attn_norm.weight", (e,), f32), (p + "post_attention_norm.weight", (e,), f32)]
    if (il + 1) % x.get(f"{a}.full_attention_interval", 4) == 0:
        hd, nh, nkv = spec.head_k, spec.n_head, spec.n_head_kv
        out += [
            (p + "attn_q.weight", (e, hd * nh * 2), w),
            (p + "attn_k.weight", (e, hd * nkv), w),
            (p + "attn_v.weight", (e, hd * nkv), w),
            (p + "attn_output.weight", (hd * nh, e), w),
            (p + "attn_q_norm.weight", (hd,), f32),
            (p + "attn_k_norm.weight", (hd,), f32),
        ]
    else:
        d_state, n_k, n_v = x[f"{a}.ssm.state_size"], x[f"{a}.ssm.group_count"], x[f"{a}.ssm.time_step_rank"]
        key_dim, value_dim = d_state * n_k, x[f"{a}.ssm.inner_size"]
        out += [
            (p + "attn_qkv.weight", (e, 2 * key_dim + value_dim), w),
            (p + "attn_gate.weight", (e, value_dim), w),
            (p + "ssm_conv1d.weight", (x[f"{a}.ssm.conv_kernel"], 2 * key_dim + value_dim), f32),
            (p + "ssm_dt.bias", (n_v,), f32),
            (p + "ssm_a", (n_v,), f32),
            *(
                [(p + "ssm_beta.weight", (e, n_v), w), (p + "ssm_alpha.weight", (e, n_v), w)]
                if a.startswith("qwen35")  # Qwen3.5: beta and alpha projected apart
                else [(p + "ssm_ba.weight", (e, 2 * n_v), w)]
            ),
            (p + "ssm_norm.weight", (value_dim // n_v,), f32),
            (p + "ssm_out.weight", (value_dim, e), w),
        ]
    if a == "qwen35":  # dense FFN
        ff = spec.n_ff
        return out + [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
        ]
    ne, fe, fs = spec.n_expert, spec.n_ff_exp, spec.n_ff_shexp
    return out + [
        (p + "ffn_gate_inp.weight", (e, ne), f32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_gate_inp_shexp.weight", (e,), f32),
        (p + "ffn_gate_shexp.weight", (e, fs), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
    ]


def _global_tensors(spec: TinySpec) -> list[tuple[str, tuple[int, ...], Q]]:
    """Tensors outside the layers besides the embeddings and output matrix (norms, their biases)."""
    e = spec.n_embd
    if spec.arch == "gemma3n":
        return _gemma3n_globals(spec)
    if spec.arch == "gemma4":
        return _gemma4_globals(spec)
    if spec.arch in ("rwkv6", "rwkv7"):
        return [(f"{n}.{s}", (e,), Q.F32) for n in ("token_embd_norm", "output_norm") for s in ("weight", "bias")]
    if spec.arch in ("gpt2", "starcoder"):  # learned position embeddings
        return [
            ("position_embd.weight", (e, spec.n_ctx_train), Q.F32),
            ("output_norm.weight", (e,), Q.F32),
            ("output_norm.bias", (e,), Q.F32),
        ]
    if spec.arch in ("orion", "starcoder2", "stablelm", "phi2", "falcon"):
        out = [("output_norm.weight", (e,), Q.F32), ("output_norm.bias", (e,), Q.F32)]
        return [*out, ("output.bias", (spec.n_vocab,), Q.F32)] if spec.arch == "phi2" else out
    if spec.arch == "olmo":  # layer norms without weights: no tensor at all
        return []
    return [("token_embd_norm.weight" if spec.arch in ("lfm2", "lfm2moe") else "output_norm.weight", (e,), Q.F32)]


def _attn_tensors(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    kv = spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    return [
        (p + "attn_q.weight", (e, hk * spec.n_head), w),
        (p + "attn_k.weight", (e, hk * kv), w),
        (p + "attn_v.weight", (e, hk * kv), w),
        (p + "attn_output.weight", (hk * spec.n_head, e), w),
    ]


# Gemma 3n's fixed sizes (llama_hparams: n_altup, laurel_rank, n_embd_altup; not read from the header)
GEMMA3N_ALTUP, GEMMA3N_LAUREL_RANK, GEMMA3N_EMBD_ALTUP = 4, 64, 256


def _gemma3n_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """A Gemma 3n block (llama_model_gemma3n::load_arch_tensors): gemma3's attention and GELU FFN,
    plus the AltUp router and coefficients, Laurel's low-rank branch and the per-layer input gate."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    n, rank, pe = GEMMA3N_ALTUP, GEMMA3N_LAUREL_RANK, GEMMA3N_EMBD_ALTUP
    hk, ff = spec.head_k, spec.n_ff
    return [
        (p + "attn_norm.weight", (e,), f32),
        *_attn_tensors(spec, il),
        (p + "attn_q_norm.weight", (hk,), f32),
        (p + "attn_k_norm.weight", (hk,), f32),
        (p + "post_attention_norm.weight", (e,), f32),
        (p + "ffn_norm.weight", (e,), f32),
        (p + "ffn_gate.weight", (e, ff), w),
        (p + "ffn_up.weight", (e, ff), w),
        (p + "ffn_down.weight", (ff, e), w),
        (p + "post_ffw_norm.weight", (e,), f32),
        (p + "inp_gate.weight", (e, pe), w),
        (p + "proj.weight", (pe, e), w),
        (p + "post_norm.weight", (e,), f32),
        (p + "altup_correct_coef.weight", (n, n), f32),
        (p + "altup_correct_scale.weight", (e,), f32),
        (p + "altup_predict_coef.weight", (n, n * n), f32),
        (p + "altup_router.weight", (e, n), f32),
        (p + "altup_router_norm.weight", (e,), f32),
        (p + "laurel_l.weight", (e, rank), w),
        (p + "laurel_r.weight", (rank, e), w),
        (p + "laurel_post_norm.weight", (e,), f32),
    ]


def _gemma3n_globals(spec: TinySpec) -> list[tuple[str, tuple[int, ...], Q]]:
    """Gemma 3n's tensors outside the blocks: the AltUp projections and the per-layer embeddings."""
    e, n, pe = spec.n_embd, GEMMA3N_ALTUP, GEMMA3N_EMBD_ALTUP
    return [
        ("altup_proj.weight", (e, e, n - 1), Q.F16),
        ("altup_unembd_proj.weight", (e, e, n - 1), Q.F16),
        ("per_layer_token_embd.weight", (pe * spec.n_layer, spec.n_vocab), spec.embd_type),
        ("per_layer_model_proj.weight", (e, pe * spec.n_layer), spec.weight_type),
        ("per_layer_proj_norm.weight", (pe,), Q.F32),
        ("output_norm.weight", (e,), Q.F32),
    ]


# Gemma 4's tiny layout: which layers use the sliding window (the header carries it as a per-layer array),
# their head size beside the global layers' one, and the per-layer-embedding width
GEMMA4_SWA = (True, True, True, False, True, False)
GEMMA4_HEAD_SWA, GEMMA4_EMBD_PER_LAYER = 64, 64


def _gemma4_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """A Gemma 4 block (llama_model_gemma4::load_arch_tensors): gemma3's attention with a per-layer head
    size (no V projection in layer 3: V is K), the per-layer input gate and an output scale. Layers
    sharing an earlier layer's cache have no K/V."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    hk = GEMMA4_HEAD_SWA if GEMMA4_SWA[il] else spec.head_k
    q_dim, kv_dim, ff, pe = hk * spec.n_head, hk * spec.n_head_kv, spec.n_ff, GEMMA4_EMBD_PER_LAYER
    owns_kv = il < spec.n_layer - int(spec.extra_kv.get("gemma4.attention.shared_kv_layers", 0))
    out = [(p + "attn_norm.weight", (e,), f32), (p + "attn_q.weight", (e, q_dim), w)]
    if owns_kv:
        out.append((p + "attn_k.weight", (e, kv_dim), w))
        if il != 3:
            out.append((p + "attn_v.weight", (e, kv_dim), w))
        out.append((p + "attn_k_norm.weight", (hk,), f32))
    return out + [
        (p + "attn_output.weight", (q_dim, e), w),
        (p + "attn_q_norm.weight", (hk,), f32),
        (p + "post_attention_norm.weight", (e,), f32),
        (p + "layer_output_scale.weight", (1,), f32),
        (p + "ffn_norm.weight", (e,), f32),
        (p + "ffn_gate.weight", (e, ff), w),
        (p + "ffn_up.weight", (e, ff), w),
        (p + "ffn_down.weight", (ff, e), w),
        (p + "post_ffw_norm.weight", (e,), f32),
        (p + "inp_gate.weight", (e, pe), w),
        (p + "proj.weight", (pe, e), w),
        (p + "post_norm.weight", (e,), f32),
    ]


def _gemma4_globals(spec: TinySpec) -> list[tuple[str, tuple[int, ...], Q]]:
    """Gemma 4's tensors outside the blocks: the per-layer embeddings and the global layers' RoPE factors."""
    e, pe = spec.n_embd, GEMMA4_EMBD_PER_LAYER
    return [
        ("per_layer_token_embd.weight", (pe * spec.n_layer, spec.n_vocab), spec.embd_type),
        ("per_layer_model_proj.weight", (e, pe * spec.n_layer), spec.weight_type),
        ("per_layer_proj_norm.weight", (pe,), Q.F32),
        ("rope_freqs.weight", (spec.head_k // 2,), Q.F32),
        ("output_norm.weight", (e,), Q.F32),
    ]


def _falcon_h1_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """Attention and a Mamba-2 mixer in every layer; llama.cpp names the FFN norm without ".weight"."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    return (
        _ssm_layer(spec, il)
        + _attn_tensors(spec, il)
        + [
            (p + "ffn_norm", (e,), f32),
            (p + "ffn_gate.weight", (e, spec.n_ff), w),
            (p + "ffn_up.weight", (e, spec.n_ff), w),
            (p + "ffn_down.weight", (spec.n_ff, e), w),
        ]
    )


def _nemotron_h_experts(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """nemotron_h_moe's routed ReLU² experts (in a latent space when moe_latent_size is set) and shared expert."""
    e, w, p, ne = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_expert
    latent = int(spec.extra_kv.get(f"{spec.arch}.moe_latent_size", 0))  # type: ignore[call-overload]
    me, fe, fs = latent or e, spec.n_ff_exp, spec.n_ff_shexp
    out = [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "exp_probs_b.bias", (ne,), Q.F32),
        (p + "ffn_up_exps.weight", (me, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, me, ne), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
    ]
    if latent:
        out += [(p + "ffn_latent_down.weight", (e, latent), w), (p + "ffn_latent_up.weight", (latent, e), w)]
    return out


def _nemotron_h_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """A Mamba-2 mixer (no KV heads, no FFN), attention (no FFN) or a ReLU² feed-forward block."""
    e, w, p = spec.n_embd, spec.weight_type, f"blk.{il}."
    n_ff = spec.ff_lengths[il]
    if il >= spec.n_layer - int(spec.extra_kv.get(f"{spec.arch}.nextn_predict_layers", 0)):  # type: ignore[call-overload]
        # the multi-token-prediction block: NextN fusion, attention and experts in one
        return [
            (p + "nextn.enorm.weight", (e,), Q.F32),
            (p + "nextn.hnorm.weight", (e,), Q.F32),
            (p + "nextn.eh_proj.weight", (2 * e, e), w),
            (p + "nextn.shared_head_norm.weight", (e,), Q.F32),
            (p + "attn_norm.weight", (e,), Q.F32),
            *_attn_tensors(spec, il),
            (p + "post_attention_norm.weight", (e,), Q.F32),
            *_nemotron_h_experts(spec, il),
        ]
    if n_ff and spec.n_expert:
        return [(p + "attn_norm.weight", (e,), Q.F32), *_nemotron_h_experts(spec, il)]
    if n_ff:
        return [
            (p + "attn_norm.weight", (e,), Q.F32),
            (p + "ffn_up.weight", (e, n_ff), w),
            (p + "ffn_down.weight", (n_ff, e), w),
        ]
    if spec.kv_heads[il]:
        return [(p + "attn_norm.weight", (e,), Q.F32), *_attn_tensors(spec, il)]
    return _ssm_layer(spec, il)


def _plamo2_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """A Mamba mixer (no KV heads) or attention with a fused QKV, then a SwiGLU block; several norms
    are named without ".weight" (llama_model_plamo2::load_arch_tensors)."""
    x, a = spec.extra_kv, spec.arch
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    out = [(p + "attn_norm.weight", (e,), f32)]
    if spec.kv_heads[il] == 0:
        d_conv, d_inner, d_state = x[f"{a}.ssm.conv_kernel"], x[f"{a}.ssm.inner_size"], x[f"{a}.ssm.state_size"]
        n_heads, dt_dim = x[f"{a}.ssm.time_step_rank"], max(64, e // 16)
        out += [
            (p + "ssm_in.weight", (e, 2 * d_inner), w),
            (p + "ssm_conv1d.weight", (d_conv, d_inner), f32),
            (p + "ssm_x.weight", (d_inner, dt_dim + 2 * d_state), w),
            (p + "ssm_dt.weight", (dt_dim, n_heads), w),
            (p + "ssm_dt.bias", (n_heads,), f32),
            (p + "ssm_a", (n_heads,), f32),
            (p + "ssm_d", (n_heads,), f32),
            (p + "ssm_out.weight", (d_inner, e), w),
            (p + "ssm_dt_norm", (dt_dim,), f32),
            (p + "ssm_b_norm", (d_state,), f32),
            (p + "ssm_c_norm", (d_state,), f32),
        ]
    else:
        hk, kv = spec.head_k, spec.kv_heads[il]
        nh = spec.q_heads[il] if spec.q_heads else spec.n_head
        out += [
            (p + "attn_qkv.weight", (e, hk * (nh + 2 * kv)), w),
            (p + "attn_q_norm.weight", (hk, nh), f32),
            (p + "attn_k_norm.weight", (hk, kv), f32),
            (p + "attn_output.weight", (hk * nh, e), w),
        ]
    return out + [
        (p + "post_attention_norm", (e,), f32),
        (p + "ffn_norm.weight", (e,), f32),
        (p + "ffn_down.weight", (spec.n_ff, e), w),
        (p + "ffn_up.weight", (e, 2 * spec.n_ff), w),
        (p + "post_ffw_norm", (e,), f32),
    ]


def _glm4moe_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """GLM-4.5 layers: attention with biases, post_attention_norm before the FFN, dense leading layers,
    then sigmoid-routed experts with a selection bias and an ungated shared expert."""
    e, w, f32, p = spec.n_embd, spec.weight_type, Q.F32, f"blk.{il}."
    q_dim, kv_dim = spec.head_k * spec.n_head, spec.head_k * spec.n_head_kv
    out = [
        (p + "attn_norm.weight", (e,), f32),
        (p + "attn_q.weight", (e, q_dim), w),
        (p + "attn_k.weight", (e, kv_dim), w),
        (p + "attn_v.weight", (e, kv_dim), w),
        (p + "attn_q.bias", (q_dim,), f32),
        (p + "attn_k.bias", (kv_dim,), f32),
        (p + "attn_v.bias", (kv_dim,), f32),
        (p + "attn_output.weight", (q_dim, e), w),
        (p + "post_attention_norm.weight", (e,), f32),
    ]
    if il < spec.extra_kv.get("glm4moe.leading_dense_block_count", 0):
        ff = spec.n_ff
        return out + [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
        ]
    ne, fe, fs = spec.n_expert, spec.n_ff_exp, spec.n_ff_shexp
    return out + [
        (p + "ffn_gate_inp.weight", (e, ne), f32),
        (p + "exp_probs_b.bias", (ne,), f32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
        (p + "ffn_gate_shexp.weight", (e, fs), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
    ]


def _exaone_moe_layer(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    """EXAONE MoE layers (llama_model_exaone_moe::load_arch_tensors): per-head Q/K norms; a dense FFN in
    the leading layers and the multi-token-prediction layers, routed plus shared experts elsewhere."""
    x, a = spec.extra_kv, spec.arch
    e, w, f32, hk, p = spec.n_embd, spec.weight_type, Q.F32, spec.head_k, f"blk.{il}."
    out = [
        *_attn_tensors(spec, il),
        (p + "attn_norm.weight", (e,), f32),
        (p + "attn_q_norm.weight", (hk,), f32),
        (p + "attn_k_norm.weight", (hk,), f32),
        (p + "ffn_norm.weight", (e,), f32),
    ]
    mtp = il >= spec.n_layer - x.get(f"{a}.nextn_predict_layers", 0)
    if il < x.get(f"{a}.leading_dense_block_count", 0) or mtp:
        out += [
            (p + "ffn_gate.weight", (e, spec.n_ff), w),
            (p + "ffn_down.weight", (spec.n_ff, e), w),
            (p + "ffn_up.weight", (e, spec.n_ff), w),
        ]
    else:
        ne, fe, fs = spec.n_expert, spec.n_ff_exp, spec.n_ff_shexp
        out += [
            (p + "ffn_gate_inp.weight", (e, ne), f32),
            (p + "exp_probs_b.bias", (ne,), f32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "ffn_gate_shexp.weight", (e, fs), w),
            (p + "ffn_down_shexp.weight", (fs, e), w),
            (p + "ffn_up_shexp.weight", (e, fs), w),
        ]
    if mtp:
        out += [
            (p + "nextn.eh_proj.weight", (2 * e, e), w),
            (p + "nextn.enorm.weight", (e,), f32),
            (p + "nextn.hnorm.weight", (e,), f32),
        ]
    return out


def _layer_tensors(spec: TinySpec, il: int) -> list[tuple[str, tuple[int, ...], Q]]:
    if spec.arch == "plamo2":
        return _plamo2_layer(spec, il)
    if spec.arch == "falcon-h1":
        return _falcon_h1_layer(spec, il)
    if spec.arch in ("nemotron_h", "nemotron_h_moe"):
        return _nemotron_h_layer(spec, il)
    if spec.arch in ("lfm2", "lfm2moe", "granitehybrid", "jamba"):
        return _hybrid_layer(spec, il)
    if spec.arch in ("mamba", "mamba2"):
        return _ssm_layer(spec, il)
    if spec.arch in ("deepseek2", "mistral4", "deepseek32"):
        return _deepseek2_layer(spec, il)
    if spec.arch in ("rwkv6", "rwkv7"):
        return _rwkv_layer(spec, il)
    if spec.arch in ("qwen3next", "qwen35", "qwen35moe"):
        return _qwen3next_layer(spec, il)
    if spec.arch == "glm4moe":
        return _glm4moe_layer(spec, il)
    if spec.arch == "exaone-moe":
        return _exaone_moe_layer(spec, il)
    if spec.arch == "gemma3n":
        return _gemma3n_layer(spec, il)
    if spec.arch == "gemma4":
        return _gemma4_layer(spec, il)
    e, hk, ff = spec.n_embd, spec.head_k, spec.n_ff
    q_dim, kv_dim = hk * spec.n_head, hk * spec.n_head_kv
    w, f32 = spec.weight_type, Q.F32
    p = f"blk.{il}."
    if spec.arch in ("olmo2", "exaone4"):  # no pre-norms: Q/K norms and post-norms (llama_model_olmo2)
        qn, kn = (q_dim, kv_dim) if spec.arch == "olmo2" else (hk, hk)  # exaone4: per head
        return [
            (p + "attn_q.weight", (e, q_dim), w),
            (p + "attn_k.weight", (e, kv_dim), w),
            (p + "attn_v.weight", (e, kv_dim), w),
            (p + "attn_output.weight", (q_dim, e), w),
            (p + "attn_q_norm.weight", (qn,), f32),
            (p + "attn_k_norm.weight", (kn,), f32),
            (p + "post_attention_norm.weight", (e,), f32),
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
            (p + "post_ffw_norm.weight", (e,), f32),
        ]
    if spec.arch == "apertus":  # per-head Q/K norms with biases, an FFN without a gate (xIELU)
        return [
            (p + "attn_norm.weight", (e,), f32),
            *_attn_tensors(spec, il),
            (p + "attn_q_norm.weight", (hk,), f32),
            (p + "attn_q_norm.bias", (hk,), f32),
            (p + "attn_k_norm.weight", (hk,), f32),
            (p + "attn_k_norm.bias", (hk,), f32),
            (p + "ffn_norm.weight", (e,), f32),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
        ]
    if spec.arch == "olmo":  # layer norms without weights, no biases (llama_model_olmo)
        return [
            *_attn_tensors(spec, il),
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
        ]
    out: list[tuple[str, tuple[int, ...], Q]] = [(p + "attn_norm.weight", (e,), f32)]
    if spec.arch in ("orion", "starcoder2", "stablelm", "phi2", "falcon", "gpt2", "starcoder"):  # norm biases
        out.append((p + "attn_norm.bias", (e,), f32))
    if spec.arch in ("phi3", "phi2", "falcon", "gpt2", "starcoder"):
        out.append((p + "attn_qkv.weight", (e, q_dim + 2 * kv_dim), w))
        if spec.arch in ("phi2", "gpt2", "starcoder"):
            out.append((p + "attn_qkv.bias", (q_dim + 2 * kv_dim,), f32))
    else:
        out += [
            (p + "attn_q.weight", (e, q_dim), w),
            (p + "attn_k.weight", (e, kv_dim), w),
            (p + "attn_v.weight", (e, kv_dim), w),
        ]
    if spec.arch in ("qwen2", "qwen2vl", "gpt-oss", "dream", "starcoder2"):
        out += [
            (p + "attn_q.bias", (q_dim,), f32),
            (p + "attn_k.bias", (kv_dim,), f32),
            (p + "attn_v.bias", (kv_dim,), f32),
        ]
    if spec.arch in ("qwen3", "gemma3", "qwen3moe", "qwen3vl", "qwen3vlmoe", "hunyuan-dense"):
        out += [(p + "attn_q_norm.weight", (hk,), f32), (p + "attn_k_norm.weight", (hk,), f32)]
    if spec.arch in ("olmoe", "minimax-m2"):  # Q/K norms over the whole projection
        out += [(p + "attn_q_norm.weight", (q_dim,), f32), (p + "attn_k_norm.weight", (kv_dim,), f32)]
    out.append((p + "attn_output.weight", (q_dim, e), w))
    if spec.arch == "falcon":  # attention and a GELU FFN side by side off one norm, no biases
        return out + [(p + "ffn_up.weight", (e, ff), w), (p + "ffn_down.weight", (ff, e), w)]
    if spec.arch == "phi2":  # attention and a GELU FFN side by side off one norm, biases
        return out + [
            (p + "attn_output.bias", (e,), f32),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_up.bias", (ff,), f32),
            (p + "ffn_down.weight", (ff, e), w),
            (p + "ffn_down.bias", (e,), f32),
        ]
    if spec.arch in ("starcoder2", "gpt2", "starcoder"):  # biases everywhere, a GELU FFN without a gate
        return out + [
            (p + "attn_output.bias", (e,), f32),
            (p + "ffn_norm.weight", (e,), f32),
            (p + "ffn_norm.bias", (e,), f32),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_up.bias", (ff,), f32),
            (p + "ffn_down.weight", (ff, e), w),
            (p + "ffn_down.bias", (e,), f32),
        ]
    if spec.arch == "gpt-oss":
        out += [
            (p + "attn_output.bias", (e,), f32),
            (p + "attn_sinks.weight", (spec.n_head,), f32),
            (p + "post_attention_norm.weight", (e,), f32),
        ]
        ne, fe = spec.n_expert, spec.n_ff_exp
        return out + [
            (p + "ffn_gate_inp.weight", (e, ne), f32),
            (p + "ffn_gate_inp.bias", (ne,), f32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_gate_exps.bias", (fe, ne), f32),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "ffn_up_exps.bias", (fe, ne), f32),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "ffn_down_exps.bias", (e, ne), f32),
        ]
    if spec.arch in ("gemma2", "gemma3", "glm4"):
        out.append((p + "post_attention_norm.weight", (e,), f32))
    if spec.arch in ("cohere2", "command-r"):  # one norm before attention and FFN side by side
        return out + [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
        ]
    # Seed-OSS names the FFN's pre-norm "post_attention_norm"
    out.append((p + ("post_attention_norm.weight" if spec.arch == "seed_oss" else "ffn_norm.weight"), (e,), f32))
    if spec.arch in ("orion", "stablelm"):
        out.append((p + "ffn_norm.bias", (e,), f32))
    if spec.arch == "llama4":  # experts every n-th layer, with a shared expert as wide as one of them
        if (il + 1) % int(spec.extra_kv.get("llama4.interleave_moe_layer_step", 1)):
            return out + [
                (p + "ffn_gate.weight", (e, ff), w),
                (p + "ffn_up.weight", (e, ff), w),
                (p + "ffn_down.weight", (ff, e), w),
            ]
        ne, fe = spec.n_expert, spec.n_ff_exp
        return out + [
            (p + "ffn_gate_inp.weight", (e, ne), f32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
            (p + "ffn_gate_shexp.weight", (e, fe), w),
            (p + "ffn_up_shexp.weight", (e, fe), w),
            (p + "ffn_down_shexp.weight", (fe, e), w),
        ]
    if spec.n_expert:
        ne, fe = spec.n_expert, spec.n_ff_exp or ff
        out += [
            (p + "ffn_gate_inp.weight", (e, ne), f32),
            (p + "ffn_gate_exps.weight", (e, fe, ne), w),
            (p + "ffn_up_exps.weight", (e, fe, ne), w),
            (p + "ffn_down_exps.weight", (fe, e, ne), w),
        ]
        if spec.arch in ("ernie4_5-moe", "minimax-m2"):  # a per-expert selection bias
            out.append((p + "exp_probs_b.bias", (ne,), f32))
        if spec.n_ff_shexp:
            fs = spec.n_ff_shexp
            if spec.arch not in ("granitemoe", "ernie4_5-moe"):  # shared experts with no gate of their own
                out.append((p + "ffn_gate_inp_shexp.weight", (e,), f32))
            out += [
                (p + "ffn_gate_shexp.weight", (e, fs), w),
                (p + "ffn_up_shexp.weight", (e, fs), w),
                (p + "ffn_down_shexp.weight", (fs, e), w),
            ]
        return out
    if spec.arch in ("phi3", "glm4"):  # gate and up fused in one matrix
        out += [(p + "ffn_up.weight", (e, 2 * ff), w), (p + "ffn_down.weight", (ff, e), w)]
    elif spec.arch == "arcee":  # ReLU² without a gate
        out += [(p + "ffn_up.weight", (e, ff), w), (p + "ffn_down.weight", (ff, e), w)]
    else:
        out += [
            (p + "ffn_gate.weight", (e, ff), w),
            (p + "ffn_up.weight", (e, ff), w),
            (p + "ffn_down.weight", (ff, e), w),
        ]
    if spec.arch in ("gemma2", "gemma3", "glm4"):
        out.append((p + "post_ffw_norm.weight", (e,), f32))
    if spec.arch == "glm4" and il >= spec.n_layer - int(spec.extra_kv.get("glm4.nextn_predict_layers", 0)):
        out += [  # the multi-token-prediction layer's own tensors (loaded by name, then skipped)
            (p + "nextn.eh_proj.weight", (2 * e, e), w),
            (p + "nextn.enorm.weight", (e,), f32),
            (p + "nextn.hnorm.weight", (e,), f32),
        ]
    return out


def tensors_of(spec: TinySpec) -> list[tuple[str, tuple[int, ...], Q]]:
    out = [("token_embd.weight", (spec.n_embd, spec.n_vocab), spec.embd_type)]
    for il in range(spec.n_layer):
        out += _layer_tensors(spec, il)
    out += _global_tensors(spec)
    if spec.output_type is not None:
        out.append(("output.weight", (spec.n_embd, spec.n_vocab), spec.output_type))
    return out


def write_tiny_model(path: str | Path, spec: TinySpec, seed: int = 0) -> Path:
    """Write a loadable GGUF model for `spec` to `path`."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    arch = spec.arch
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(spec.name or f"tiny-{arch}")
    writer.add_context_length(spec.n_ctx_train)
    writer.add_embedding_length(spec.n_embd)
    writer.add_block_count(spec.n_layer)
    writer.add_feed_forward_length(list(spec.ff_lengths) if spec.ff_lengths else spec.n_ff)
    writer.add_head_count(list(spec.q_heads) if spec.q_heads else spec.n_head)
    writer.add_head_count_kv(list(spec.kv_heads) if spec.kv_heads else spec.n_head_kv)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    if spec.head_dim:
        writer.add_key_length(spec.head_dim)
        # MLA: K holds the latent and the RoPE part, V the latent alone
        mla_v = spec.extra_kv.get(f"{arch}.attention.kv_lora_rank")
        writer.add_value_length(int(mla_v) if isinstance(mla_v, int) else spec.head_dim)
    if spec.n_swa:
        writer.add_sliding_window(spec.n_swa)
    if spec.swa_pattern:
        writer.add_uint32(f"{arch}.attention.sliding_window_pattern", spec.swa_pattern)
    if arch == "gemma2":
        writer.add_float32(f"{arch}.attn_logit_softcapping", 50.0)
        writer.add_float32(f"{arch}.final_logit_softcapping", 30.0)
    if arch == "phi3":
        writer.add_rope_dimension_count(spec.head_k)
    if spec.n_expert:
        writer.add_expert_count(spec.n_expert)
        writer.add_expert_used_count(spec.n_expert_used)
        if spec.n_ff_exp:
            writer.add_expert_feed_forward_length(spec.n_ff_exp)
        if spec.n_ff_shexp:
            writer.add_expert_shared_feed_forward_length(spec.n_ff_shexp)
    for key, value in spec.extra_kv.items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, list):
            writer.add_array(key, value)
        else:
            writer.add_string(key, str(value))
    tokens, scores, types = _vocab(spec.n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    for name, shape, t in tensors_of(spec):
        data, raw_type = _random_tensor(rng, shape, t)
        if spec.never_ends and name == "output.weight":
            assert raw_type is None, "never_ends needs an unquantized output matrix"
            data[[2, 3], :] = 0
        if raw_type is None:
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=raw_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _granite_scales(arch: str) -> dict[str, object]:
    """Granite's embedding, residual, attention and logit scales (logit_scale is required)."""
    return {
        f"{arch}.logit_scale": 8.0,
        f"{arch}.residual_scale": 0.22,
        f"{arch}.embedding_scale": 12.0,
        f"{arch}.attention.scale": 0.0078125,
    }


# A zoo of small models covering the architectures and tensor types the planner supports.
ENDLESS = TinySpec(
    "llama",
    n_layer=4,
    n_embd=256,
    n_head=4,
    n_head_kv=4,
    n_ff=512,
    n_ctx_train=32768,
    never_ends=True,
    name="Endless tiny",
)
"""A model that practically never ends a reply by itself: for tests that need a long stream."""

# DeepSeek V3's routing: sigmoid gates with a bias, normalised and scaled weights, grouped experts
_V3_ROUTING: dict[str, Any] = {
    "expert_gating_func": 2,
    "expert_weights_norm": True,
    "expert_weights_scale": 2.5,
    "expert_group_count": 4,
    "expert_group_used_count": 2,
}


def _mla_spec(arch: str, extra: dict[str, Any] | None = None, **spec: Any) -> TinySpec:
    """A tiny latent-attention (MLA) model with experts, deepseek2's shape; `extra` keys are `arch`'s."""
    keys = {
        "attention.kv_lora_rank": 64,
        "attention.q_lora_rank": 32,
        "attention.key_length_mla": 64,
        "attention.value_length_mla": 32,
        "rope.dimension_count": 32,
        "leading_dense_block_count": 1,
        "expert_shared_count": 1,
        **(extra or {}),
    }
    shape: dict[str, Any] = dict(n_head=4, n_head_kv=1, head_dim=96, n_expert=8, n_expert_used=2, n_ff_exp=32, n_ff=128)
    return TinySpec(arch, **{**shape, **spec}, extra_kv={f"{arch}.{k}": v for k, v in keys.items()})


ZOO: dict[str, TinySpec] = {
    "llama-f16": TinySpec("llama"),
    "llama-q8_0": TinySpec("llama", weight_type=Q.Q8_0, embd_type=Q.Q8_0, output_type=Q.Q8_0, n_vocab=1024),
    "llama-q4_k": TinySpec(
        "llama", n_embd=256, n_ff=512, weight_type=Q.Q4_K, embd_type=Q.Q6_K, output_type=Q.Q6_K, n_head=8, n_head_kv=4
    ),
    "qwen2-q4_0": TinySpec("qwen2", weight_type=Q.Q4_0, output_type=Q.Q8_0),
    # Ministral 3: llama's layers, queries scaled by position (attention.temperature_scale)
    "mistral3": TinySpec(
        "mistral3", n_head_kv=2, weight_type=Q.Q8_0, extra_kv={"mistral3.attention.temperature_scale": 0.1}
    ),
    "exaone": TinySpec("exaone", weight_type=Q.Q8_0),
    "smollm3": TinySpec("smollm3", n_layer=8),  # every 4th layer without RoPE
    "ernie4_5": TinySpec("ernie4_5", output_type=None),
    "minicpm": TinySpec("minicpm", weight_type=Q.Q8_0, output_type=None),
    "internlm2": TinySpec("internlm2", n_head_kv=4),
    "xverse": TinySpec("xverse", weight_type=Q.Q8_0),
    "seed_oss": TinySpec("seed_oss", n_head=4, n_head_kv=2, output_type=None),
    # OLMo 1: weightless layer norms, Q/K/V clamped (attention.clamp_kqv)
    "olmo": TinySpec(
        "olmo",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        extra_kv={"olmo.attention.layer_norm_epsilon": 1e-5, "olmo.attention.clamp_kqv": 8.0},
    ),
    "olmo2": TinySpec("olmo2", n_head_kv=4, weight_type=Q.Q8_0),
    "arcee": TinySpec("arcee", n_head_kv=2),
    "orion": TinySpec("orion", weight_type=Q.Q8_0, extra_kv={"orion.attention.layer_norm_epsilon": 1e-5}),
    "starcoder2": TinySpec("starcoder2", n_head_kv=2, extra_kv={"starcoder2.attention.layer_norm_epsilon": 1e-5}),
    "phi2": TinySpec("phi2", extra_kv={"phi2.attention.layer_norm_epsilon": 1e-5}),
    "falcon": TinySpec("falcon", n_head_kv=1, extra_kv={"falcon.attention.layer_norm_epsilon": 1e-5}),
    "gpt2": TinySpec("gpt2", n_ctx_train=4096, extra_kv={"gpt2.attention.layer_norm_epsilon": 1e-5}),
    "starcoder": TinySpec(
        "starcoder", n_head_kv=1, n_ctx_train=8192, extra_kv={"starcoder.attention.layer_norm_epsilon": 1e-5}
    ),
    "command-r": TinySpec(
        "command-r",
        n_head_kv=2,
        output_type=None,
        extra_kv={"command-r.logit_scale": 0.0625, "command-r.attention.layer_norm_epsilon": 1e-5},
    ),
    "stablelm": TinySpec("stablelm", weight_type=Q.Q8_0, extra_kv={"stablelm.attention.layer_norm_epsilon": 1e-5}),
    "olmo3": TinySpec("olmo2", n_head_kv=2, n_swa=256, n_layer=8),  # Olmo 3: 3 of 4 layers windowed
    "exaone4": TinySpec("exaone4", n_head_kv=2, weight_type=Q.Q8_0),
    "cohere2": TinySpec(
        "cohere2",
        n_head_kv=2,
        n_swa=256,
        n_layer=8,
        output_type=None,
        extra_kv={"cohere2.logit_scale": 0.0625, "cohere2.attention.layer_norm_epsilon": 1e-5},
    ),
    # the 64-layer shape is the one llama.cpp gives windowed layers (3 of 4, RoPE on those only)
    "exaone4-swa": TinySpec("exaone4", n_head_kv=2, n_swa=256, n_layer=64, n_ff=128),
    "ernie4_5-moe": TinySpec(
        "ernie4_5-moe",
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=128,
        extra_kv={"ernie4_5-moe.interleave_moe_layer_step": 1},
    ),
    "glm4moe": TinySpec(
        "glm4moe",
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        n_ff=256,
        extra_kv={
            "glm4moe.expert_shared_count": 1,
            "glm4moe.leading_dense_block_count": 1,
            "glm4moe.expert_weights_norm": True,
            "glm4moe.expert_weights_scale": 2.5,
            "glm4moe.expert_gating_func": 2,
        },
    ),
    "minimax-m2": TinySpec(
        "minimax-m2",
        n_head_kv=2,
        n_expert=8,
        n_expert_used=2,
        n_ff=64,
        n_ff_exp=64,
        extra_kv={"minimax-m2.expert_gating_func": 2},
    ),
    # Qwen2-VL's text model: qwen2 with multi-section RoPE (four positions a token)
    # EXAONE MoE: 3 of 4 layers windowed (RoPE on those only), a leading dense layer, sigmoid-routed
    # experts with a selection bias and a shared expert, one multi-token-prediction layer (skipped)
    "exaone-moe": TinySpec(
        "exaone-moe",
        n_layer=6,
        n_head_kv=2,
        n_swa=128,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "exaone-moe.leading_dense_block_count": 1,
            "exaone-moe.nextn_predict_layers": 1,
            "exaone-moe.expert_gating_func": 2,
            "exaone-moe.expert_weights_norm": True,
            "exaone-moe.expert_weights_scale": 2.5,
            "exaone-moe.expert_shared_count": 1,
        },
    ),
    "qwen2vl": TinySpec(
        "qwen2vl", n_head_kv=2, weight_type=Q.Q8_0, extra_kv={"qwen2vl.rope.dimension_sections": [8, 4, 4, 0]}
    ),
    "qwen3vl": TinySpec(
        "qwen3vl",
        n_head=4,
        n_head_kv=2,
        head_dim=32,
        extra_kv={"qwen3vl.n_deepstack_layers": 2, "qwen3vl.rope.dimension_sections": [8, 4, 4, 0]},
    ),
    "qwen3vlmoe": TinySpec(
        "qwen3vlmoe",
        n_head=4,
        n_head_kv=2,
        head_dim=32,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        extra_kv={"qwen3vlmoe.n_deepstack_layers": 3, "qwen3vlmoe.rope.dimension_sections": [8, 4, 4, 0]},
    ),
    # Hunyuan dense: per-head Q/K norms after RoPE; an expert count of 1 means no experts
    "hunyuan-dense": TinySpec(
        "hunyuan-dense",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        output_type=None,
        extra_kv={"hunyuan-dense.expert_count": 1, "hunyuan-dense.expert_used_count": 1},
    ),
    # Apertus: xIELU parameters per layer (an array) or for all layers (one number)
    "apertus": TinySpec(
        "apertus",
        n_head_kv=2,
        weight_type=Q.Q8_0,
        extra_kv={
            "xielu.alpha_n": [0.8, 0.7, 0.6, 0.5],  # keys without the architecture's prefix
            "xielu.alpha_p": 0.8,
            "xielu.beta": 0.5,
            "xielu.eps": 1e-6,
        },
    ),
    "qwen3-hd": TinySpec("qwen3", n_embd=128, n_head=4, n_head_kv=2, head_dim=64, output_type=None),
    "phi3": TinySpec("phi3", n_head_kv=4, weight_type=Q.Q8_0),
    # GLM-4 dense: pre- and post-norms around attention and FFN, fused gate/up, a skipped MTP layer
    "glm4": TinySpec("glm4", n_layer=5, n_head_kv=2, weight_type=Q.Q8_0, extra_kv={"glm4.nextn_predict_layers": 1}),
    # Llama 4 Scout's shape in small: 3 of 4 layers chunked (8,192 tokens), every 2nd layer routed (1 of 4
    # experts) with a shared expert; head size 64 so that CUDA runs its flash attention
    "llama4": TinySpec(
        "llama4",
        n_layer=8,
        n_head=2,
        n_head_kv=1,
        n_expert=4,
        n_expert_used=1,
        n_ff_exp=64,
        n_ctx_train=32768,
        weight_type=Q.Q8_0,
        extra_kv={"llama4.interleave_moe_layer_step": 2},
    ),
    "gemma": TinySpec("gemma", n_head_kv=1, output_type=None, n_vocab=2048),
    "gemma2": TinySpec("gemma2", n_swa=256, output_type=None, n_layer=4),
    "llama-moe": TinySpec("llama", n_expert=4, n_expert_used=2, weight_type=Q.Q8_0, name="tiny-mixtral"),
    "qwen2moe": TinySpec("qwen2moe", n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_shexp=128),
    "qwen3moe": TinySpec("qwen3moe", n_expert=8, n_expert_used=2, n_ff_exp=64, head_dim=64, weight_type=Q.Q4_0),
    "olmoe": TinySpec("olmoe", n_expert=8, n_expert_used=2, n_ff=64, n_head_kv=4),
    "gpt-oss": TinySpec(
        "gpt-oss", n_expert=4, n_expert_used=2, n_ff_exp=64, head_dim=64, n_swa=128, weight_type=Q.MXFP4, n_vocab=1024
    ),
    "deepseek2": _mla_spec("deepseek2"),
    "mistral4": _mla_spec("mistral4"),
    "deepseek2-mtp": _mla_spec("deepseek2", {"nextn_predict_layers": 1}, n_layer=5, name="tiny-glm-mtp"),
    "deepseek3": _mla_spec("deepseek2", _V3_ROUTING, name="tiny-deepseek-v3"),
    "deepseek32": _mla_spec(
        "deepseek32",
        {
            **_V3_ROUTING,
            # the lightning indexer: its key cache holds one 64-wide key a token and layer; it keeps
            # the 2,048 best-scored cells, fewer than the cache holds past a 2,048-token context
            "attention.indexer.head_count": 4,
            "attention.indexer.key_length": 64,
            "attention.indexer.top_k": 2048,
        },
        name="tiny-deepseek-v3.2",
    ),
    "mamba": TinySpec(
        "mamba",
        n_head=0,
        n_head_kv=0,
        n_ff=0,
        extra_kv={
            "mamba.ssm.conv_kernel": 4,
            "mamba.ssm.inner_size": 256,
            "mamba.ssm.state_size": 16,
            "mamba.ssm.time_step_rank": 8,
        },
    ),
    "mamba2": TinySpec(
        "mamba2",
        n_head=0,
        n_head_kv=0,
        n_ff=0,
        weight_type=Q.Q8_0,
        extra_kv={
            "mamba2.ssm.conv_kernel": 4,
            "mamba2.ssm.inner_size": 256,
            "mamba2.ssm.state_size": 64,
            "mamba2.ssm.time_step_rank": 8,
            "mamba2.ssm.group_count": 2,
        },
    ),
    "lfm2": TinySpec(
        "lfm2",
        n_layer=6,
        n_head_kv=2,
        kv_heads=(0, 0, 2, 0, 0, 2),
        output_type=None,
        extra_kv={"lfm2.shortconv.l_cache": 3},
    ),
    "lfm2moe": TinySpec(
        "lfm2moe",
        n_layer=6,
        n_head_kv=2,
        kv_heads=(0, 0, 2, 0, 0, 2),
        output_type=None,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        extra_kv={
            "lfm2moe.shortconv.l_cache": 3,
            "lfm2moe.leading_dense_block_count": 2,
            "lfm2moe.expert_gating_func": 2,  # sigmoid, with a per-expert selection bias
        },
    ),
    "granitehybrid": TinySpec(
        "granitehybrid",
        n_layer=6,
        n_head_kv=2,
        kv_heads=(0, 0, 0, 2, 0, 0),
        weight_type=Q.Q8_0,
        extra_kv={
            "granitehybrid.ssm.conv_kernel": 4,
            "granitehybrid.ssm.inner_size": 256,
            "granitehybrid.ssm.state_size": 32,
            "granitehybrid.ssm.time_step_rank": 8,
            "granitehybrid.ssm.group_count": 1,
            "granitehybrid.residual_scale": 0.22,
            "granitehybrid.embedding_scale": 12.0,
            "granitehybrid.logit_scale": 8.0,
            "granitehybrid.attention.scale": 0.015625,
        },
    ),
    "granite": TinySpec("granite", weight_type=Q.Q8_0, output_type=None, extra_kv=_granite_scales("granite")),
    "granitemoe": TinySpec("granitemoe", n_expert=4, n_expert_used=2, n_ff=64, extra_kv=_granite_scales("granitemoe")),
    "granitemoe-shared": TinySpec(
        "granitemoe",
        n_expert=8,
        n_expert_used=2,
        n_ff=64,
        n_ff_shexp=128,
        weight_type=Q.Q4_0,
        name="tiny-granitemoe-shared",
        extra_kv=_granite_scales("granitemoe"),
    ),
    "jamba": TinySpec(
        "jamba",
        n_layer=6,
        n_head_kv=2,
        kv_heads=(0, 0, 0, 2, 0, 0),
        n_expert=4,
        n_expert_used=2,
        n_ff=128,
        extra_kv={
            "jamba.ssm.conv_kernel": 4,
            "jamba.ssm.inner_size": 256,
            "jamba.ssm.state_size": 16,
            "jamba.ssm.time_step_rank": 8,
        },
    ),
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
    "qwen35": TinySpec(
        "qwen35",
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_ff=128,
        weight_type=Q.Q8_0,
        extra_kv={
            "qwen35.ssm.conv_kernel": 4,
            "qwen35.ssm.inner_size": 128,
            "qwen35.ssm.state_size": 32,
            "qwen35.ssm.time_step_rank": 4,
            "qwen35.ssm.group_count": 2,
            "qwen35.full_attention_interval": 4,
            "qwen35.rope.dimension_sections": [16, 8, 8, 0],
        },
    ),
    "qwen35moe": TinySpec(
        "qwen35moe",
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        n_ff=64,
        extra_kv={
            "qwen35moe.ssm.conv_kernel": 4,
            "qwen35moe.ssm.inner_size": 128,
            "qwen35moe.ssm.state_size": 32,
            "qwen35moe.ssm.time_step_rank": 4,
            "qwen35moe.ssm.group_count": 4,
            "qwen35moe.full_attention_interval": 4,
            "qwen35moe.rope.dimension_sections": [16, 8, 8, 0],
        },
    ),
    "qwen3next": TinySpec(
        "qwen3next",
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=64,
        n_ff=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "qwen3next.ssm.conv_kernel": 4,
            "qwen3next.ssm.inner_size": 128,
            "qwen3next.ssm.state_size": 32,
            "qwen3next.ssm.time_step_rank": 4,
            "qwen3next.ssm.group_count": 2,
            "qwen3next.full_attention_interval": 2,
            "qwen3next.rope.dimension_count": 16,
        },
    ),
    "falcon-h1": TinySpec(
        "falcon-h1",
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        weight_type=Q.Q8_0,
        extra_kv={
            "falcon-h1.ssm.conv_kernel": 4,
            "falcon-h1.ssm.inner_size": 256,
            "falcon-h1.ssm.state_size": 32,
            "falcon-h1.ssm.time_step_rank": 8,
            "falcon-h1.ssm.group_count": 1,
        },
    ),
    "nemotron-h": TinySpec(
        "nemotron_h",
        n_layer=6,
        kv_heads=(0, 2, 0, 0, 0, 0),
        ff_lengths=(0, 0, 256, 0, 256, 0),
        output_type=None,
        extra_kv={
            "nemotron_h.ssm.conv_kernel": 4,
            "nemotron_h.ssm.inner_size": 256,
            "nemotron_h.ssm.state_size": 32,
            "nemotron_h.ssm.time_step_rank": 8,
            "nemotron_h.ssm.group_count": 2,
            "nemotron_h.attention.layer_norm_epsilon": 1e-5,
        },
    ),
    "nemotron-h-moe": TinySpec(
        "nemotron_h_moe",
        n_layer=6,
        kv_heads=(0, 0, 2, 0, 0, 0),
        ff_lengths=(0, 64, 0, 64, 0, 64),
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=128,
        extra_kv={
            "nemotron_h_moe.ssm.conv_kernel": 4,
            "nemotron_h_moe.ssm.inner_size": 256,
            "nemotron_h_moe.ssm.state_size": 32,
            "nemotron_h_moe.ssm.time_step_rank": 8,
            "nemotron_h_moe.ssm.group_count": 2,
            "nemotron_h_moe.attention.layer_norm_epsilon": 1e-5,
            "nemotron_h_moe.expert_weights_norm": True,
            "nemotron_h_moe.expert_weights_scale": 2.5,
        },
    ),
    # Nemotron 3 Super's shape: experts in a latent space, a multi-token-prediction block (not loaded)
    "nemotron-h-super": TinySpec(
        "nemotron_h_moe",
        n_layer=7,
        n_embd=256,
        kv_heads=(0, 0, 2, 0, 0, 0, 2),
        ff_lengths=(0, 64, 0, 64, 0, 64, 64),
        n_expert=8,
        n_expert_used=2,
        n_ff_exp=64,
        n_ff_shexp=128,
        weight_type=Q.Q8_0,
        extra_kv={
            "nemotron_h_moe.ssm.conv_kernel": 4,
            "nemotron_h_moe.ssm.inner_size": 512,
            "nemotron_h_moe.ssm.state_size": 32,
            "nemotron_h_moe.ssm.time_step_rank": 8,
            "nemotron_h_moe.ssm.group_count": 2,
            "nemotron_h_moe.attention.layer_norm_epsilon": 1e-5,
            "nemotron_h_moe.moe_latent_size": 64,
            "nemotron_h_moe.nextn_predict_layers": 1,
            "nemotron_h_moe.expert_weights_norm": True,
            "nemotron_h_moe.expert_weights_scale": 2.5,
        },
    ),
    "plamo2": TinySpec(
        "plamo2",
        n_layer=6,
        head_dim=64,
        kv_heads=(0, 2, 0, 2, 0, 2),
        q_heads=(0, 4, 0, 4, 0, 4),
        weight_type=Q.Q8_0,
        extra_kv={
            "plamo2.ssm.conv_kernel": 4,
            "plamo2.ssm.inner_size": 256,
            "plamo2.ssm.state_size": 16,
            "plamo2.ssm.time_step_rank": 4,
            "plamo2.ssm.group_count": 0,
        },
    ),
    "gemma3": TinySpec(
        "gemma3",
        n_layer=6,
        n_swa=512,
        head_dim=64,
        n_head_kv=1,
        output_type=None,
        weight_type=Q.Q4_0,
        embd_type=Q.Q8_0,
        n_vocab=4096,
    ),
    # 25 layers: llama.cpp gives only the first 20 a KV cache; the last five read layer 18's (windowed)
    # or layer 19's (global) cache, one window of every five layers being global
    "gemma3n": TinySpec(
        "gemma3n",
        n_layer=25,
        n_head=2,
        n_head_kv=1,
        n_swa=256,
        output_type=None,
        weight_type=Q.Q4_0,
        embd_type=Q.Q8_0,
        name="tiny-gemma-3n",
    ),
    # 6 layers, windowed but for layers 3 and 5 (64-value heads, 128 in the global layers); the last two
    # read layer 2's (windowed) or layer 3's (global) cache; per-layer embeddings, layer 3 without attn_v
    "gemma4": TinySpec(
        "gemma4",
        n_layer=6,
        n_head=2,
        n_head_kv=1,
        head_dim=128,
        n_swa=256,
        output_type=None,
        weight_type=Q.Q4_0,
        embd_type=Q.Q8_0,
        name="tiny-gemma-4",
        extra_kv={
            "gemma4.attention.sliding_window_pattern": list(GEMMA4_SWA),
            "gemma4.attention.shared_kv_layers": 2,
            "gemma4.attention.key_length_swa": GEMMA4_HEAD_SWA,
            "gemma4.attention.value_length_swa": GEMMA4_HEAD_SWA,
            "gemma4.embedding_length_per_layer_input": GEMMA4_EMBD_PER_LAYER,
            "gemma4.final_logit_softcapping": 30.0,
            "gemma4.rope.freq_base_swa": 10000.0,
            "gemma4.rope.dimension_count_swa": GEMMA4_HEAD_SWA,
        },
    ),
}


def write_tiny_projector(
    path: str | Path, image_size: int = 224, patch_size: int = 14, n_embd: int = 128, n_layer: int = 2, seed: int = 0
) -> Path:
    """A small CLIP-style vision projector (mmproj) header with random weights."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_string("clip.projector_type", "mlp")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_uint32("clip.vision.image_size", image_size)
    writer.add_uint32("clip.vision.patch_size", patch_size)
    writer.add_uint32("clip.vision.embedding_length", n_embd)
    writer.add_uint32("clip.vision.feed_forward_length", 4 * n_embd)
    writer.add_uint32("clip.vision.attention.head_count", 4)
    writer.add_uint32("clip.vision.block_count", n_layer)
    shapes = [("v.patch_embd.weight", (patch_size, patch_size, 3, n_embd), Q.F16)]
    for il in range(n_layer):
        p = f"v.blk.{il}."
        shapes += [
            (p + "attn_qkv.weight", (n_embd, 3 * n_embd), Q.F16),
            (p + "ffn_up.weight", (n_embd, 4 * n_embd), Q.F16),
            (p + "ffn_down.weight", (4 * n_embd, n_embd), Q.F16),
        ]
    shapes.append(("mm.0.weight", (n_embd, 256), Q.F16))
    for name, shape, t in shapes:
        data, _ = _random_tensor(rng, shape, t)
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
