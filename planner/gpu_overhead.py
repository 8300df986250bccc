"""GPU memory llama.cpp takes beyond its buffers: the driver context and the runtime's workspaces.

llama.cpp does not report it; NVML does. Measured on a lent H100 80GB HBM3 (driver 580.159.04,
CUDA 13.0, llama.cpp of llama-cpp-python 0.3.36; bench/gpu/measure.py, record in
tests/data/cuda_h100.json), as the process's GPU memory minus its buffers (each rounded up to
cudaMalloc's 2 MiB pages), over 14 loads of 5 models:

- after the model load: 518 MiB in every run, whatever the model and the layers offloaded: the
  CUDA context (this process's primary context with ggml-cuda's module loaded lazily);
- after a prompt and a 2,000-token reply, a further 78 to 102 MiB with flash attention on, and
  176 to 188 MiB with it off or with experts (MUL_MAT_ID): cuBLAS's handle and workspace, the
  kernels loaded on first use, ggml-cuda's memory pool at its peak, and CUDA graphs. It does not
  grow with the context (4,096 and 32,768 tokens gave the same) and hardly with the micro-batch
  (128: 78, 512: 86, 2,048: 100 MiB).

The planner adds the context and the upper end of the runtime figure for the graph's kind.
Another GPU model or driver changes the context by tens of MiB, so the figure is named as
measured on that GPU (the plan's note), not as exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.hardware import MiB
from planner.units import round_up

PAGE = 2 * MiB  # cudaMalloc rounds large allocations up to 2 MiB pages


@dataclass(frozen=True)
class Overhead:
    """A GPU backend's fixed cost outside llama.cpp's buffers: its context and runtime."""

    context: int
    runtime: int
    source: str  # where the figure comes from, for the plan's note
    measured: bool

    @property
    def total(self) -> int:
        return self.context + self.runtime


CUDA_CONTEXT = 518 * MiB
CUDA_RUNTIME_FLASH_ATTN = 104 * MiB
CUDA_RUNTIME_CUBLAS = 190 * MiB
CUDA_SOURCE = "measured on an H100 80GB with driver 580 and CUDA 13.0"

# not measured yet: the public ranges for a primary context, workspaces included
_ESTIMATES = {"rocm": 400 * MiB, "vulkan": 200 * MiB, "metal": 64 * MiB}


def gpu_overhead(backend: str, flash_attn: bool, experts: bool) -> Overhead:
    """The memory a GPU backend takes outside llama.cpp's buffers, once the conversation runs."""
    if backend == "cuda":
        runtime = CUDA_RUNTIME_FLASH_ATTN if flash_attn and not experts else CUDA_RUNTIME_CUBLAS
        return Overhead(CUDA_CONTEXT, runtime, CUDA_SOURCE, measured=True)
    return Overhead(_ESTIMATES.get(backend, 256 * MiB), 0, "an estimate", measured=False)


def on_pages(size: int) -> int:
    """A buffer as the driver holds it: whole 2 MiB pages."""
    return round_up(size, PAGE)
