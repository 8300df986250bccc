"""GPU memory llama.cpp takes beyond its buffers: the driver context and the runtime's workspaces.

llama.cpp does not report it; NVML sees it. The figure is made per device, from the device itself:

Derived from the pinned source (llama-cpp-python 0.3.36's ggml/src/ggml-cuda, see planner.cuda_paths):
- cuBLAS's workspace: `ggml_backend_cuda_context::cublas_handle` (common.cuh) gives each handle 32 MiB
  from compute capability 9.0, 4 MiB below, none in HIP builds. It exists once cuBLAS has run: graphs
  without flash attention, or with experts (MUL_MAT_ID).
- Weights unpacked in the pool: where `ggml_cuda_should_use_mmq` (mmq.cu) turns a quantized matrix away
  from MMQ, `ggml_cuda_mul_mat_cublas` converts it whole to F16 in ggml-cuda's pool (Volta above 64
  tokens, P100 and Maxwell, AMD CDNA1/2 and RDNA3 for some types above 128-256 tokens); the pool never
  shrinks. Planned: the largest such op at a full micro-batch (0 on Turing and newer).
- Flash attention with a quantized KV cache: the F16 copies of K and V live in the compute buffer in
  this build (`ggml_cuda_flash_attn_ext_get_alloc_size`, fattn.cu); planner.compute prices them there.
- Without flash attention the pool grows with the conversation: KQ and KQV run through cuBLAS, the
  softmaxed KQ narrowed to F16 in the pool (`attention_pool_peak`). It peaks when a full micro-batch
  meets a full cache; the plan counts that peak (`parts["attention_pool"]`). Measured on a lent H200
  (tests/data/cuda_h200.json.gz): a 6,144-token prompt into a llama-8B shape's 8,192-token context took
  174 MiB more than a 512-token one; the rule says 176 (192 MiB at 6,144 cells, 16 at 512).

Fitted from measurements:
- The CUDA context: its bulk is the local-memory reservation, one slot per resident thread of every
  SM, so CONTEXT = 13 MiB + 2,002 B x SMs x max threads per SM, fitted to seven public measurements
  (PUBLIC_CONTEXTS, within 6%). Our own H100 80GB HBM3 (132 SMs) measured 518 MiB in every load
  (bench/gpu/measure.py, tests/data/cuda_h100.json.gz): that figure stands for that GPU exactly.
- The runtime beyond cuBLAS's workspace, measured on that H100 through a 2,000-token reply: 104 MiB
  with flash attention (kernels loaded on first use, the pool at its peak, CUDA graphs), 190 MiB
  with cuBLAS (its handle, its kernels, its 32 MiB workspace, and the attention pool of those runs'
  512-token prompts, 16 MiB: 142 MiB beside the two). A lent H200 (same SMs, driver 580) measured
  the same within -6 to +24 MiB in 15 loads (docs/accuracy.md, CUDA).

Assumed:
- That the runtime's fitted part is the same on every NVIDIA GPU and driver (kernel images load
  lazily from CUDA 12.2 on Linux, 12.3 on Windows; an older driver loads them all and its context
  is far larger), and that one cuBLAS handle exists (one stream).
- ROCm, Vulkan and Metal: estimates, named as such in the plan (a HIP runtime of ~0.4 GiB per
  process in one public report on an RX 7900 XTX; Vulkan's driver context and its prealloc buffers;
  Metal's command buffers), until this machine learns better.

Learned on this machine (app.devices.learned_overhead): what the device held beyond the buffers after
each load and reply, kept at its peak; it replaces the context and the runtime for that device,
driver and build (never below the derived model-specific part).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.hardware import Device, MiB
from planner.units import round_up

if TYPE_CHECKING:  # imported where a GPU is priced: a plan for the CPU alone needs neither
    from planner.cuda_paths import AttentionShape, MatrixWeight

PAGE = 2 * MiB  # cudaMalloc rounds large allocations up to 2 MiB pages

CUDA_CONTEXT_BASE = 13 * MiB
CUDA_CONTEXT_PER_THREAD = 2002  # bytes per resident thread slot (SMs x max threads per SM)

# the H100 we measured: context and runtime, exact for that GPU (tests/planner/test_cuda_record.py)
CUDA_CONTEXT = 518 * MiB
CUDA_RUNTIME_FLASH_ATTN = 104 * MiB
CUDA_RUNTIME_CUBLAS = 190 * MiB
CUDA_SOURCE = "measured on an H100 80GB with driver 580 and CUDA 13.0"
H100_IDENTITY = ("9.0", 132, 2048)
# the attention pool of the fitted runs (512 cells x 512 tokens x 32 heads as F16), planned apart
CUDA_ATTENTION_POOL_IN_FIT = 16 * MiB
# the runtime with cuBLAS beside its workspace and the attention pool (fitted on the H100, workspace 32 MiB)
CUDA_CUBLAS_REST = CUDA_RUNTIME_CUBLAS - 32 * MiB - CUDA_ATTENTION_POOL_IN_FIT

# public measurements of the CUDA context (card, SMs, threads per SM, MiB low, MiB high, where):
# llama.cpp PR #23604 and issues #20582, #25465; ollama #17482; unsloth PR #8669; ours (bench/gpu)
PUBLIC_CONTEXTS = (
    ("RTX 4060 Ti", 34, 1536, 107, 107, "llama.cpp #20582"),
    ("RTX 3090", 82, 1536, 256, 256, "llama.cpp #25465"),
    ("RTX 3090", 82, 1536, 264, 264, "ollama #17482"),
    ("RTX 5090", 170, 1536, 506, 506, "llama.cpp PR #23604"),
    ("RTX PRO 6000 Blackwell", 188, 1536, 555, 555, "unsloth PR #8669"),
    ("B200", 148, 2048, 612, 612, "llama.cpp PR #23604"),
    ("H100 SXM", 132, 2048, 518, 518, "ours: tests/data/cuda_h100.json.gz"),
)

# not measured yet: a primary context and the library workspaces, per backend
ESTIMATES = {"rocm": 400 * MiB, "vulkan": 200 * MiB, "metal": 64 * MiB}
_ESTIMATE_WHY = {
    "rocm": "the HIP runtime per process (~0.4 GiB in one public report, RX 7900 XTX)",
    "vulkan": "the Vulkan driver's context and ggml-vulkan's preallocated buffers",
    "metal": "Metal's command buffers and library",
}


@dataclass(frozen=True)
class Workload:
    """What a plan asks of one GPU, as far as the runtime's memory depends on it."""

    flash_attn: bool
    experts: bool
    n_tokens: int = 512  # the prompt micro-batch
    weights: tuple[MatrixWeight, ...] = ()  # quantized matrices multiplied there
    attention: tuple[AttentionShape, ...] = ()  # attention layers whose cache is there
    n_expert_used: int = 0

    @property
    def uses_cublas(self) -> bool:
        return not self.flash_attn or self.experts


@dataclass(frozen=True)
class Overhead:
    """A GPU backend's cost outside llama.cpp's buffers: its context and runtime, and their basis."""

    context: int
    runtime: int
    source: str  # where the figures come from, for the plan's note
    measured: bool  # figures measured beside buffers held in whole 2 MiB pages (CUDA): plan the pages too
    parts: dict[str, int] = field(default_factory=dict)
    estimate: bool = False  # no figure of this backend is derived or measured

    @property
    def total(self) -> int:
        return self.context + self.runtime


def context_for(sm_count: int, threads_per_sm: int) -> int:
    """The CUDA context of a GPU: 13 MiB + 2,002 B per resident thread slot (fitted)."""
    return CUDA_CONTEXT_BASE + CUDA_CONTEXT_PER_THREAD * sm_count * threads_per_sm


class _Identity:
    """What a GPU is, from the device or the card table (a plain class: one dataclass less to import)."""

    __slots__ = ("cc", "from_table", "name", "sm_count", "threads_per_sm")

    def __init__(
        self, sm_count: int | None, threads_per_sm: int | None, cc: str | None, name: str, from_table: bool = False
    ) -> None:
        self.sm_count, self.threads_per_sm, self.cc, self.name, self.from_table = (
            sm_count,
            threads_per_sm,
            cc,
            name,
            from_table,
        )


def _identity(d: Device) -> _Identity:
    if d.sm_count and d.threads_per_sm and d.compute_capability:
        return _Identity(d.sm_count, d.threads_per_sm, d.compute_capability, d.card or d.description)
    from planner.cards import identify  # the card table: only for a GPU that did not say what it is

    card = identify(d.card or d.description)
    if card is not None and card.backend in ("cuda", "rocm"):
        return _Identity(
            d.sm_count or card.sm_count,
            d.threads_per_sm or card.threads_per_sm,
            d.compute_capability or card.compute_capability,
            card.name,
            from_table=True,
        )
    return _Identity(d.sm_count, d.threads_per_sm, d.compute_capability, d.card or d.description)


def _mib(n: int) -> str:
    return f"{n / MiB:,.0f} MiB"


def _cuda(d: Device, work: Workload) -> Overhead:
    from planner import cuda_paths

    ident = _identity(d)
    cc = cuda_paths.parse_cc(ident.cc)
    parts: dict[str, int] = {}
    notes: list[str] = []
    key = (ident.cc, ident.sm_count, ident.threads_per_sm)
    if key == H100_IDENTITY:
        parts["context"] = CUDA_CONTEXT
        notes.append(f"CUDA context {_mib(CUDA_CONTEXT)} {CUDA_SOURCE}")
    elif ident.sm_count and ident.threads_per_sm:
        parts["context"] = context_for(ident.sm_count, ident.threads_per_sm)
        where = " (SMs from vramchat's card table)" if ident.from_table else ""
        notes.append(
            f"CUDA context {_mib(parts['context'])} derived from {ident.sm_count} SMs x "
            f"{ident.threads_per_sm:,} threads{where} (13 MiB + 2,002 B each, fitted to 7 measured GPUs within 6%)"
        )
    else:
        parts["context"] = CUDA_CONTEXT
        notes.append(f"this GPU's SM count is unknown: the CUDA context {CUDA_SOURCE} ({_mib(CUDA_CONTEXT)}) stands in")
    workspace = cuda_paths.cublas_workspace(cc if cc is not None else 900)
    if work.uses_cublas:
        parts["cublas_workspace"] = workspace
        parts["runtime"] = CUDA_CUBLAS_REST
    else:
        parts["runtime"] = CUDA_RUNTIME_FLASH_ATTN
    fitted = "fitted on an H100" if key != H100_IDENTITY else "measured on it"
    runtime_note = f"runtime {_mib(parts['runtime'])} {fitted}"
    if work.uses_cublas:
        runtime_note += f" + cuBLAS workspace {_mib(workspace)} (ggml-cuda, compute capability {ident.cc or '9.0'})"
    notes.append(runtime_note)
    if cc is not None:
        dequant = cuda_paths.pool_size(
            cuda_paths.dequant_pool_peak(list(work.weights), work.n_tokens, cc, work.n_expert_used), cc
        )
        if dequant:
            parts["dequantized_weights"] = dequant
            notes.append(f"{_mib(dequant)} of weights unpacked to F16 in the pool (this GPU skips MMQ for them)")
    pool = attention_pool(work, cc)
    if pool:
        parts["attention_pool"] = pool
        notes.append(
            f"without flash attention ggml-cuda's pool holds {_mib(pool)} by a full context (the softmaxed "
            "KQ of a full micro-batch as F16; measured on an H200)"
        )
    context = parts.pop("context")
    return Overhead(context, sum(parts.values()), "; ".join(notes), True, {"context": context, **parts})


def attention_pool(work: Workload, cc: int | None) -> int:
    """What ggml-cuda's pool takes for attention without flash attention, at the cells `work` names
    (a full cache: the plan; fewer: what a conversation that far has grown it to)."""
    if work.flash_attn or not work.attention:
        return 0
    from planner import cuda_paths

    cc = cc if cc is not None else 900
    return cuda_paths.pool_size(cuda_paths.attention_pool_peak(list(work.attention), work.n_tokens, cc), cc)


def _rocm(d: Device, work: Workload) -> Overhead:
    from planner import cuda_paths

    ident = _identity(d)
    cc = cuda_paths.parse_cc(ident.cc)
    parts = {"context": ESTIMATES["rocm"]}
    notes = [f"{_mib(ESTIMATES['rocm'])}, an estimate of {_ESTIMATE_WHY['rocm']}"]
    if cc is not None:
        dequant = cuda_paths.dequant_pool_peak(list(work.weights), work.n_tokens, cc, work.n_expert_used)
        if dequant:
            parts["dequantized_weights"] = dequant
            notes.append(f"{_mib(dequant)} of weights unpacked to F16 in HIP's pool ({ident.cc} skips MMQ for them)")
    else:
        notes.append("the gfx target is unknown: weights unpacked to F16 on CDNA or RDNA3 are not counted")
    pool = attention_pool(work, cc)
    if pool:
        parts["attention_pool"] = pool
        notes.append(f"without flash attention HIP's pool holds {_mib(pool)} by a full context")
    return Overhead(
        parts["context"],
        sum(parts.values()) - parts["context"],
        "; ".join(notes),
        False,
        parts,
        estimate=True,
    )


def _learned(d: Device, derived: Overhead, work: Workload) -> Overhead:
    learned = d.learned
    assert learned is not None
    runtime = learned.runtime_cublas if work.uses_cublas else learned.runtime_flash_attn
    # what this model adds on this GPU, whatever the learned replies reached: its unpacked weights, and
    # without flash attention the whole derived runtime (its pool at a full context)
    model_part = derived.runtime if "attention_pool" in derived.parts else derived.parts.get("dequantized_weights", 0)
    if runtime is None:
        runtime = derived.runtime  # a load seen, no reply of this kind yet: the derived runtime
        runtime_basis = "runtime derived (no reply of this kind seen yet)"
    else:
        runtime = max(runtime, model_part)
        runtime_basis = f"runtime {_mib(runtime)} learned"
    loads = f"{learned.loads} load{'s' if learned.loads != 1 else ''}"
    replies = f", {learned.replies} repl{'ies' if learned.replies != 1 else 'y'}" if learned.replies else ""
    raised = f", raised by {learned.raised_by}" if learned.raised_by else ""
    source = f"learned on this GPU, {loads}{replies}{raised}: context {_mib(learned.context)}, {runtime_basis}"
    parts = {"context": learned.context, "runtime": runtime}
    return Overhead(learned.context, runtime, source, derived.measured, parts)


def gpu_overhead(device: Device, work: Workload) -> Overhead:
    """The memory a GPU backend takes outside llama.cpp's buffers, once the conversation runs."""
    if device.backend == "cuda":
        derived = _cuda(device, work)
    elif device.backend == "rocm":
        derived = _rocm(device, work)
    else:
        size = ESTIMATES.get(device.backend, 256 * MiB)
        why = _ESTIMATE_WHY.get(device.backend, "the backend's context")
        derived = Overhead(size, 0, f"{_mib(size)}, an estimate of {why}", False, {"context": size}, estimate=True)
    if device.learned is not None:
        return _learned(device, derived, work)
    return derived


def on_pages(size: int) -> int:
    """A buffer as the driver holds it: whole 2 MiB pages."""
    return round_up(size, PAGE)
