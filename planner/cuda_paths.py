"""Which path ggml-cuda takes for a matrix multiplication, and what it then holds in its memory pool.

A mirror of the pinned build's choices (ggml/src/ggml-cuda of llama-cpp-python 0.3.36), for the
memory they cost beside llama.cpp's buffers. ggml-cuda serves NVIDIA (CUDA) and AMD (HIP) alike;
a device is known by its compute capability as ggml-cuda encodes it (`cc`): 100 x major + 10 x minor
for NVIDIA, 0x1000000 + the gfx target's hex digits for AMD (`ggml_cuda_parse_id`: gfx1100 ->
0x1001100).

- `should_use_mmq` is mmq.cu's `ggml_cuda_should_use_mmq`: the quantized kernels (MMQ) read the
  weights as they are; where it says no, `ggml_cuda_mul_mat_cublas` unpacks the whole weight matrix
  to F16 (F32 without fast FP16) in the pool first. Turing and newer always use MMQ; Pascal GTX
  (6.1) too; Volta from a batch of 64 tokens, P100 and Maxwell always (dense weights), AMD CDNA1/2
  and RDNA3 for some types above 128-256 tokens.
- `cublas_workspace` is `ggml_backend_cuda_context::cublas_handle` (common.cuh): ggml-cuda gives each
  cuBLAS handle a workspace of its own, 32 MiB from compute capability 9.0 (Hopper, Blackwell), 4 MiB
  below; not in HIP builds.
- The pool (ggml-cuda.cu): NVIDIA builds use the VMM pool (2 MiB granules, allocations rounded to
  128 B, grown to the peak of the temporaries in use at once and never shrunk); HIP builds default to
  the legacy pool (`GGML_HIP_NO_VMM` ON): up to 256 cached buffers, each 1.05x the request rounded
  to 256 B.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.ggml_types import GGMLType
from planner.units import round_up

MiB = 1024**2

OFFSET_AMD = 0x1000000
PASCAL, DP4A, VOLTA, TURING, AMPERE, ADA, HOPPER, BLACKWELL = 600, 610, 700, 750, 800, 890, 900, 1200
CDNA1, CDNA2, CDNA3, CDNA4 = (OFFSET_AMD + x for x in (0x908, 0x90A, 0x942, 0x950))
RDNA1, RDNA2, RDNA3, RDNA3_5, RDNA4 = (OFFSET_AMD + x for x in (0x1010, 0x1030, 0x1100, 0x1150, 0x1200))
VEGA, GFX909, GFX90C = (OFFSET_AMD + x for x in (0x900, 0x909, 0x90C))

MMQ_DP4A_MAX_BATCH_SIZE = 64  # mmq.cuh
MMVQ_MAX_BATCH_SIZE = 8  # mmvq.cuh: up to this batch a quantized matrix is multiplied by MMVQ

# mmq.cu: the types MMQ has kernels for
_MMQ_TYPES = frozenset(
    [
        "q1_0",
        "q2_0",
        "q4_0",
        "q4_1",
        "q5_0",
        "q5_1",
        "q8_0",
        "q2_k",
        "q3_k",
        "q4_k",
        "q5_k",
        "q6_k",
        "iq1_s",
        "iq2_xxs",
        "iq2_xs",
        "iq2_s",
        "iq3_xxs",
        "iq3_s",
        "iq4_xs",
        "iq4_nl",
        "mxfp4",
        "nvfp4",
    ]
)


def parse_cc(text: str | None) -> int | None:
    """ggml-cuda's compute capability from "8.9" (NVIDIA) or "gfx1100" (AMD); None when unknown."""
    if not text:
        return None
    text = text.strip().lower()
    if text.startswith("gfx"):
        digits = text[3:].split(":", 1)[0].removesuffix("-generic")
        try:
            return OFFSET_AMD + int(digits, 16)
        except ValueError:
            return None
    major, _, minor = text.partition(".")
    try:
        return 100 * int(major) + 10 * int(minor or 0)
    except ValueError:
        return None


def is_nvidia(cc: int) -> bool:
    return cc < OFFSET_AMD


def is_cdna(cc: int) -> bool:
    return CDNA1 <= cc < RDNA1 and cc not in (GFX909, GFX90C)


def is_rdna3(cc: int) -> bool:
    return RDNA3 <= cc < RDNA4


def fast_fp16(cc: int) -> bool:
    """common.cuh `fast_fp16_hardware_available`: Pascal and newer except GTX 10xx (6.1), every AMD GPU."""
    return (is_nvidia(cc) and cc >= PASCAL and cc != DP4A) or not is_nvidia(cc)


def _fp16_mma(cc: int) -> bool:
    return (is_nvidia(cc) and cc >= VOLTA) or is_cdna(cc) or cc >= RDNA3


def should_use_mmq(type_: GGMLType, cc: int, ne11: int, n_experts: int = 0) -> bool:
    """mmq.cu `ggml_cuda_should_use_mmq` (a build with the device's own architecture compiled in,
    neither GGML_CUDA_FORCE_MMQ nor GGML_CUDA_FORCE_CUBLAS)."""
    name = type_.name.lower()
    if name not in _MMQ_TYPES:
        return False
    if is_nvidia(cc):
        if cc >= TURING:
            return True
        if cc < DP4A:  # Maxwell, P100: MMQ for experts only
            return cc >= PASCAL and n_experts > 0
        return not _fp16_mma(cc) or ne11 < MMQ_DP4A_MAX_BATCH_SIZE
    if is_cdna(cc):  # amd_mfma_available
        if CDNA3 <= cc < CDNA4:
            return True
        if n_experts > 64 or ne11 <= 128:
            return True
        if name in ("q4_0", "q4_1", "q5_0", "q5_1"):
            return True
        return ne11 <= 256 and name in ("q4_k", "q5_k")
    if is_rdna3(cc):  # amd_wmma_available, RDNA3
        if n_experts >= 64:
            return True
        if name == "q2_k":
            return ne11 <= 128
        if name == "q6_k":
            return ne11 <= (128 if cc < RDNA3_5 else 256)
        if name in ("iq2_xs", "iq2_s"):
            return cc >= RDNA3_5 or ne11 <= 128
        return True
    if cc >= RDNA4:
        return True
    if cc in (VEGA, GFX909, GFX90C):
        return n_experts > 0
    return not is_cdna(cc) or ne11 < MMQ_DP4A_MAX_BATCH_SIZE


def cublas_workspace(cc: int) -> int:
    """The workspace ggml-cuda gives each cuBLAS handle (none in a HIP build: hipBLAS keeps its own)."""
    if not is_nvidia(cc):
        return 0
    return 32 * MiB if cc >= HOPPER else 4 * MiB


def _prefer_f32_output(cc: int) -> bool:
    """`ggml_cuda_mul_mat_cublas_impl`: with an F16 compute type, these GPUs write F32 straight out."""
    return cc == VOLTA or cc >= RDNA4 or is_cdna(cc)


def _vmm(size: int) -> int:
    return round_up(size, 128)


def _legacy(size: int) -> int:
    return round_up(int(1.05 * size), 256)


@dataclass(frozen=True)
class MatrixWeight:
    """A weight matrix llama.cpp multiplies on the GPU: its type, and ne = (cols, rows, experts)."""

    type: GGMLType
    ne: tuple[int, int, int]


def _cublas_temporaries(weight: MatrixWeight, n_tokens: int, cc: int, rows: int) -> list[int]:
    """What `ggml_cuda_mul_mat_cublas` holds at once for a quantized weight: the weight unpacked,
    the activations converted, the F16 result before it is widened."""
    cols = weight.ne[0]
    f16 = fast_fp16(cc)
    width = 2 if f16 else 4
    parts = [cols * rows * width]  # src0 unpacked to the compute type
    if f16:
        parts.append(cols * n_tokens * 2)  # src1 F32 -> F16
        if not _prefer_f32_output(cc):
            parts.append(rows * n_tokens * 2)  # dst_temp
    return parts


def dequant_pool_peak(weights: list[MatrixWeight], n_tokens: int, cc: int, n_expert_used: int = 0) -> int:
    """The pool's peak from the weights multiplied through cuBLAS rather than MMQ, at a prompt batch of
    `n_tokens`: ops run one after another and free their temporaries, so the peak is the largest op's
    sum (0 where MMQ takes every weight, as on Turing and newer)."""
    if n_tokens <= MMVQ_MAX_BATCH_SIZE:
        return 0
    pool = _vmm if is_nvidia(cc) else _legacy
    peak = 0
    for w in weights:
        if not w.type.is_quantized:
            continue
        n_experts = w.ne[2] if w.ne[2] > 1 else 0
        if should_use_mmq(w.type, cc, n_tokens, n_experts):
            continue
        if n_experts:
            # ggml_cuda_mul_mat_id's fallback: the routed rows sorted into F32 copies, then each
            # expert's slice through ggml_cuda_mul_mat (at worst with every token)
            used = max(n_expert_used, 1)
            parts = [n_tokens * used * w.ne[0] * 4, n_tokens * used * w.ne[1] * 4]
            parts += _cublas_temporaries(w, n_tokens, cc, w.ne[1])
        else:
            parts = _cublas_temporaries(w, n_tokens, cc, w.ne[1])
        peak = max(peak, sum(pool(p) for p in parts))
    return peak


@dataclass(frozen=True)
class AttentionShape:
    """One attention layer's KV cache on the GPU, for the pool's use without flash attention."""

    n_kv: int  # cells of its cache (the whole context, or the sliding window)
    n_head: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    k_quantized: bool = False


def attention_pool_peak(layers: list[AttentionShape], n_tokens: int, cc: int) -> int:
    """Without flash attention, KQ and KQV go through cuBLAS (batches above 16 tokens): KQ at F32
    precision (llama-graph.cpp sets GGML_PREC_F32), so the F16 K is widened to F32 in the pool; KQV
    in F16, so the softmaxed F32 KQ [n_kv, tokens, heads] is narrowed to F16 in the pool, half the
    size of the KQ matrix in the compute buffer. Both peak when a full batch meets a full cache."""
    if n_tokens <= 16:
        return 0
    pool = _vmm if is_nvidia(cc) else _legacy
    peak = 0
    for a in layers:
        kq = 0 if a.k_quantized else pool(a.head_dim_k * a.n_kv * a.n_head_kv * 4)
        if fast_fp16(cc):
            kqv = pool(a.n_kv * n_tokens * a.n_head * 2)
            if not _prefer_f32_output(cc):
                kqv += pool(a.head_dim_v * n_tokens * a.n_head * 2)
        else:  # F32 compute: the F16 V widened instead
            kqv = pool(a.n_kv * a.head_dim_v * a.n_head_kv * 4)
        peak = max(peak, kq, kqv)
    return peak


def pool_size(peak: int, cc: int) -> int:
    """The pool as the driver holds it: VMM grows in 2 MiB granules."""
    return round_up(peak, 2 * MiB) if is_nvidia(cc) and peak else peak
