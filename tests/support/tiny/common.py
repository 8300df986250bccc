"""What every tiny model shares: the spec, random tensors, the vocabulary, the writer, and the
attention, FFN and expert tensors several families lay out alike.

The writer asks the spec's family module (tests/support/tiny/<family>.py, named as the planner's
family in planner.archs.FAMILIES; llama's for an architecture without one) for the tensors inside
and outside the layers: `layer_tensors(spec, il)` and `global_tensors(spec)`, and, where the
family writes header keys beyond the spec's, `header_kv(spec)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path
from types import ModuleType

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

from planner.archs import FAMILIES

# a tensor: its name, its ggml shape (ne order) and its type
Shapes = list[tuple[str, tuple[int, ...], Q]]

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
    head_dim_v: int | None = None  # value length when it differs from the key length
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
    # header keys beyond the spec's, with the architecture's prefix; None leaves a key out (the RMS
    # epsilon, which every tiny model otherwise gets)
    extra_kv: dict[str, object] = field(default_factory=dict)
    # the end-of-generation tokens (</s>, <|endoftext|>) get a zero row in the output matrix, so that
    # the model practically never ends a reply by itself (for tests that need a long stream)
    never_ends: bool = False
    # tensors llama.cpp's loader takes when present (TENSOR_NOT_REQUIRED), added to every layer or to
    # the globals (names in OPTIONAL_TENSORS), and tensors left out of the family's layout (a suffix
    # such as "attn_q_norm.weight" for every layer, a full name: "blk.3.attn_v.weight", or "blk.4.*")
    optional: tuple[str, ...] = ()
    without: tuple[str, ...] = ()
    # the axes of the family's real releases that this variant covers (docs/accuracy.md lists them)
    covers: tuple[str, ...] = ()
    # the globals (norms, output) written before the layers, as some conversions order them: then what the
    # loader maps from the last layer decides where the host's mapping ends
    globals_first: bool = False

    def with_(self, **changes: object) -> TinySpec:
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def head_k(self) -> int:
        return self.head_dim or (self.n_embd // self.n_head if self.n_head else 0)

    @property
    def head_v(self) -> int:
        return self.head_dim_v or self.head_k

    def count(self, key: str, default: int | None = None) -> int:
        """A whole number of `extra_kv`, `key` without the architecture's prefix (required without a default)."""
        full = f"{self.arch}.{key}"
        value = self.extra_kv[full] if default is None else self.extra_kv.get(full, default)
        if not isinstance(value, int):
            raise TypeError(f"{full} is {value!r}, not a whole number")
        return value


def random_tensor(rng: np.random.Generator, shape: tuple[int, ...], t: Q) -> tuple[np.ndarray, Q | None]:
    """Data for a tensor of ggml shape `shape` (ne order) in type t."""
    np_shape = tuple(reversed(shape))
    if t == Q.F32:
        return (rng.standard_normal(np_shape) * 0.02).astype(np.float32), None
    if t == Q.F16:
        return (rng.standard_normal(np_shape) * 0.02).astype(np.float16), None
    block, size = gguf.GGML_QUANT_SIZES[t]
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


def add_kv(writer: gguf.GGUFWriter, key: str, value: object) -> None:
    """A header key in the type its Python value suggests (a whole number as uint32)."""
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


def write_random_tensors(
    writer: gguf.GGUFWriter, rng: np.random.Generator, shapes: Shapes, zero_rows: dict[str, list[int]] | None = None
) -> None:
    """Random data for every tensor (`zero_rows`: rows set to zero in unquantized ones), then the file."""
    for name, shape, t in shapes:
        data, raw_type = random_tensor(rng, shape, t)
        if zero_rows and name in zero_rows:
            assert raw_type is None, f"zero rows need an unquantized {name}"
            data[zero_rows[name], :] = 0
        if raw_type is None:
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=raw_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def family_module(architecture: str) -> ModuleType:
    """The tiny-model module of an architecture's planner family (llama's for one without)."""
    return import_module(f"tests.support.tiny.{FAMILIES.get(architecture, 'llama')}")


def optional_layer_tensors(spec: TinySpec, il: int) -> Shapes:
    """The optional tensors a variant adds to layer `il` (`TinySpec.optional`)."""
    e, p, kv = spec.n_embd, f"blk.{il}.", spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    if kv == 0:  # a recurrent layer of a hybrid has no attention to add to
        return []
    ff = spec.ff_lengths[il] if spec.ff_lengths else spec.n_ff
    shapes: dict[str, Shapes] = {
        "qkv_bias": qkv_biases(spec, il),
        "attn_output_bias": [(p + "attn_output.bias", (e,), Q.F32)],
        "ffn_bias": [
            (p + "ffn_gate.bias", (ff,), Q.F32),
            (p + "ffn_down.bias", (e,), Q.F32),
            (p + "ffn_up.bias", (ff,), Q.F32),
        ],
        "qk_norm": [
            (p + "attn_q_norm.weight", (spec.head_k,), Q.F32),
            (p + "attn_k_norm.weight", (spec.head_k,), Q.F32),
        ],
        # one norm weight per head (StableLM 2 12B, Command R+)
        "qk_norm_per_head": [
            (p + "attn_q_norm.weight", (spec.head_k, spec.n_head), Q.F32),
            (p + "attn_k_norm.weight", (spec.head_k, kv), Q.F32),
        ],
    }
    return [t for name in spec.optional if name in shapes for t in shapes[name]]


def optional_global_tensors(spec: TinySpec) -> Shapes:
    """The optional tensors a variant adds outside the layers: RoPE frequency factors (llama 3's)."""
    if "rope_freqs" not in spec.optional:
        return []
    n_rot = spec.extra_kv.get(f"{spec.arch}.rope.dimension_count", spec.head_k)
    assert isinstance(n_rot, int)
    return [("rope_freqs.weight", (n_rot // 2,), Q.F32)]


def _fused(spec: TinySpec, il: int, layer: Shapes) -> Shapes:
    """The layer as convert_hf_to_gguf.py --fuse-qkv / --fuse-gate-up-exps writes it: Q, K and V in one
    attn_qkv matrix, the experts' gate and up projections in one ffn_gate_up_exps (each where present)."""
    p, by_name = f"blk.{il}.", {name: (shape, t) for name, shape, t in layer}
    out: Shapes = []
    for name, shape, t in layer:
        qkv = all(p + f"attn_{x}.weight" in by_name for x in "qkv")
        if "fused_qkv" in spec.optional and qkv and name == p + "attn_q.weight":
            (k_shape, _), (v_shape, _) = by_name[p + "attn_k.weight"], by_name[p + "attn_v.weight"]
            out.append((p + "attn_qkv.weight", (shape[0], shape[1] + k_shape[1] + v_shape[1]), t))
        elif "fused_qkv" in spec.optional and qkv and name in (p + "attn_k.weight", p + "attn_v.weight"):
            continue
        elif "fused_gate_up_exps" in spec.optional and name == p + "ffn_gate_exps.weight":
            out.append((p + "ffn_gate_up_exps.weight", (shape[0], 2 * shape[1], shape[2]), t))
        elif "fused_gate_up_exps" in spec.optional and name == p + "ffn_up_exps.weight":
            continue
        else:
            out.append((name, shape, t))
    return out


# the optional tensors above, the fused layouts, and layout flags a family reads: "separate_qkv" (Phi-3,
# which fuses Q, K and V by default), "legacy_ssm_in" (an early Qwen3-Next conversion), "attn_norm_2"
# (Falcon-40B), "mtp_heads" (a multi-token-prediction layer with its own embeddings and output head)
OPTIONAL_TENSORS = (
    "qkv_bias",
    "attn_output_bias",
    "ffn_bias",
    "qk_norm",
    "qk_norm_per_head",
    "rope_freqs",
    "fused_qkv",
    "fused_gate_up_exps",
    "separate_qkv",
    "legacy_ssm_in",
    "attn_norm_2",
    "mtp_heads",
)


def _left_out(spec: TinySpec, name: str, il: int | None = None) -> bool:
    """Whether `TinySpec.without` drops this tensor: by its layer suffix, its full name, or "blk.N.*"."""
    if name in spec.without or (il is not None and name.removeprefix(f"blk.{il}.") in spec.without):
        return True
    return any(w.endswith("*") and name.startswith(w[:-1]) for w in spec.without)


def tensors_of(spec: TinySpec) -> Shapes:
    family = family_module(spec.arch)
    unknown = set(spec.optional) - set(OPTIONAL_TENSORS)
    assert not unknown, f"unknown optional tensors {unknown}"
    out: Shapes = [("token_embd.weight", (spec.n_embd, spec.n_vocab), spec.embd_type)]
    layers: Shapes = []
    for il in range(spec.n_layer):
        layer = _fused(spec, il, family.layer_tensors(spec, il) + optional_layer_tensors(spec, il))
        layers += [t for t in layer if not _left_out(spec, t[0], il)]
    globals_ = [t for t in family.global_tensors(spec) + optional_global_tensors(spec) if not _left_out(spec, t[0])]
    if spec.output_type is not None:
        globals_.append(("output.weight", (spec.n_embd, spec.n_vocab), spec.output_type))
    return out + (globals_ + layers if spec.globals_first else layers + globals_)


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
    if spec.extra_kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6) is not None:  # None: leave it out
        writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    if spec.head_dim or spec.head_dim_v:
        writer.add_key_length(spec.head_k)
        # MLA: K holds the latent and the RoPE part, V the latent alone
        mla_v = spec.extra_kv.get(f"{arch}.attention.kv_lora_rank")
        writer.add_value_length(mla_v if isinstance(mla_v, int) and not spec.head_dim_v else spec.head_v)
    if spec.n_swa:
        writer.add_sliding_window(spec.n_swa)
    if spec.swa_pattern:
        writer.add_uint32(f"{arch}.attention.sliding_window_pattern", spec.swa_pattern)
    header_kv = getattr(family_module(arch), "header_kv", None)  # a family's keys beyond the spec's
    for key, value in (header_kv(spec) if header_kv else {}).items():
        add_kv(writer, key, value)
    if spec.n_expert:  # (a per-layer array in extra_kv replaces the spec's single value)
        writer.add_expert_count(spec.n_expert)
        if f"{arch}.expert_used_count" not in spec.extra_kv:
            writer.add_expert_used_count(spec.n_expert_used)
        if spec.n_ff_exp and f"{arch}.expert_feed_forward_length" not in spec.extra_kv:
            writer.add_expert_feed_forward_length(spec.n_ff_exp)
        if spec.n_ff_shexp:
            writer.add_expert_shared_feed_forward_length(spec.n_ff_shexp)
    for key, value in spec.extra_kv.items():
        if value is not None:
            add_kv(writer, key, value)
    tokens, scores, types = _vocab(spec.n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    write_random_tensors(writer, rng, tensors_of(spec), {"output.weight": [2, 3]} if spec.never_ends else None)
    return path


# Tensors several families lay out alike (each in llama.cpp's order of creation)


def norm(spec: TinySpec, il: int, name: str, bias: bool = False) -> Shapes:
    """A layer's norm over the embedding, `name` without ".weight" (and its bias, where `bias`)."""
    stem, e = f"blk.{il}.{name}", spec.n_embd
    return [(stem + ".weight", (e,), Q.F32), *([(stem + ".bias", (e,), Q.F32)] if bias else [])]


def fused_qkv(spec: TinySpec, il: int, bias: bool = False) -> Shapes:
    """One projection for Q, K and V (and its bias, where `bias`)."""
    stem, n_out = f"blk.{il}.attn_qkv", spec.head_k * (spec.n_head + 2 * spec.n_head_kv)
    out: Shapes = [(stem + ".weight", (spec.n_embd, n_out), spec.weight_type)]
    return [*out, (stem + ".bias", (n_out,), Q.F32)] if bias else out


def qkv(spec: TinySpec, il: int) -> Shapes:
    """Separate Q, K and V projections (per-layer KV heads where the spec has them)."""
    e, w, hk, p = spec.n_embd, spec.weight_type, spec.head_k, f"blk.{il}."
    kv = spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    return [
        (p + "attn_q.weight", (e, hk * spec.n_head), w),
        (p + "attn_k.weight", (e, hk * kv), w),
        (p + "attn_v.weight", (e, spec.head_v * kv), w),
    ]


def qkv_biases(spec: TinySpec, il: int) -> Shapes:
    """The biases of separate Q, K and V projections."""
    hk, p = spec.head_k, f"blk.{il}."
    kv = spec.kv_heads[il] if spec.kv_heads else spec.n_head_kv
    return [
        (p + "attn_q.bias", (hk * spec.n_head,), Q.F32),
        (p + "attn_k.bias", (hk * kv,), Q.F32),
        (p + "attn_v.bias", (spec.head_v * kv,), Q.F32),
    ]


def attn_output(spec: TinySpec, il: int) -> Shapes:
    """The attention's output projection."""
    return [(f"blk.{il}.attn_output.weight", (spec.head_v * spec.n_head, spec.n_embd), spec.weight_type)]


def attention(spec: TinySpec, il: int) -> Shapes:
    """Q, K, V and the output projection."""
    return qkv(spec, il) + attn_output(spec, il)


def biased_attention(spec: TinySpec, il: int) -> Shapes:
    """Q, K and V, their biases, then the output projection."""
    return qkv(spec, il) + qkv_biases(spec, il) + attn_output(spec, il)


def qk_norm_attention(spec: TinySpec, il: int) -> Shapes:
    """Q, K, V, per-head Q and K norms, then the output projection."""
    hk, p = spec.head_k, f"blk.{il}."
    norms: Shapes = [(p + "attn_q_norm.weight", (hk,), Q.F32), (p + "attn_k_norm.weight", (hk,), Q.F32)]
    return qkv(spec, il) + norms + attn_output(spec, il)


def gated_ffn(spec: TinySpec, il: int, ff: int | None = None) -> Shapes:
    """A gated FFN (gate, up, down), `ff` wide (the spec's n_ff by default)."""
    e, w, p, ff = spec.n_embd, spec.weight_type, f"blk.{il}.", ff or spec.n_ff
    return [(p + "ffn_gate.weight", (e, ff), w), (p + "ffn_up.weight", (e, ff), w), (p + "ffn_down.weight", (ff, e), w)]


def ungated_ffn(spec: TinySpec, il: int, ff: int | None = None) -> Shapes:
    """An FFN without a gate (up, down), `ff` wide (the spec's n_ff by default)."""
    e, w, p, ff = spec.n_embd, spec.weight_type, f"blk.{il}.", ff or spec.n_ff
    return [(p + "ffn_up.weight", (e, ff), w), (p + "ffn_down.weight", (ff, e), w)]


def fused_ffn(spec: TinySpec, il: int) -> Shapes:
    """A gated FFN whose gate and up projections are one matrix (up, then down)."""
    e, w, p, ff = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_ff
    return [(p + "ffn_up.weight", (e, 2 * ff), w), (p + "ffn_down.weight", (ff, e), w)]


def biased_ffn(spec: TinySpec, il: int) -> Shapes:
    """An FFN without a gate whose projections have biases (GPT-2's, Phi-2's)."""
    e, w, p, ff = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_ff
    return [
        (p + "ffn_up.weight", (e, ff), w),
        (p + "ffn_up.bias", (ff,), Q.F32),
        (p + "ffn_down.weight", (ff, e), w),
        (p + "ffn_down.bias", (e,), Q.F32),
    ]


def experts(spec: TinySpec, il: int, fe: int) -> Shapes:
    """The router and the routed experts (gate, up, down), each expert `fe` wide."""
    e, w, p, ne = spec.n_embd, spec.weight_type, f"blk.{il}.", spec.n_expert
    return [
        (p + "ffn_gate_inp.weight", (e, ne), Q.F32),
        (p + "ffn_gate_exps.weight", (e, fe, ne), w),
        (p + "ffn_up_exps.weight", (e, fe, ne), w),
        (p + "ffn_down_exps.weight", (fe, e, ne), w),
    ]


def shared_expert(spec: TinySpec, il: int, fs: int) -> Shapes:
    """The shared expert (gate, up, down), `fs` wide; its sigmoid gate, where it has one, comes before."""
    e, w, p = spec.n_embd, spec.weight_type, f"blk.{il}."
    return [
        (p + "ffn_gate_shexp.weight", (e, fs), w),
        (p + "ffn_up_shexp.weight", (e, fs), w),
        (p + "ffn_down_shexp.weight", (fs, e), w),
    ]


def nextn(spec: TinySpec, il: int) -> Shapes:
    """A multi-token-prediction layer's own tensors (loaded by name, then skipped)."""
    e, p = spec.n_embd, f"blk.{il}."
    return [
        (p + "nextn.eh_proj.weight", (2 * e, e), spec.weight_type),
        (p + "nextn.enorm.weight", (e,), Q.F32),
        (p + "nextn.hnorm.weight", (e,), Q.F32),
    ]


def output_norm(spec: TinySpec, bias: bool = False) -> Shapes:
    """The usual tensors outside the layers besides the embeddings and output matrix: the output norm."""
    out: Shapes = [("output_norm.weight", (spec.n_embd,), Q.F32)]
    return [*out, ("output_norm.bias", (spec.n_embd,), Q.F32)] if bias else out
