"""Why a load or a decode failed, read from llama.cpp's own words.

A failure for want of memory is worth retrying with a smaller plan; a broken
file or a cancelled load is not. The log usually names the memory pool that
refused (the buffer type: CUDA0, CPU, CUDA_Host ...), which tells the planner
what to shrink. The messages matched here are the ones llama.cpp 0.3.36 logs
(ggml-alloc.c, ggml-backend.cpp, ggml-cuda.cu, ggml-metal-device.m,
llama-model.cpp, llama-kv-cache.cpp, llama-context.cpp).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.devices.probes import HOST

# llama_decode's return values (llama-context.cpp): -2 an allocation failed, -3 the compute failed
DECODE_ALLOC_FAILED = -2

_BUFFER = re.compile(r"(?:failed to allocate|unable to allocate) (\S+) buffer")
_SIZED = re.compile(r"failed to allocate (\S+) buffer of size (\d+)")  # ggml-backend's alloc_tensor_range, gallocr
_CUDA_DEVICE = re.compile(r"allocating [\d.]+ MiB on device (\d+): (?:cudaMalloc|hipMalloc) failed")
_MEMORY_WORDS = (
    "failed to allocate",
    "unable to allocate",
    "out of memory",
    "outofdevicememory",
    "could not reserve space",
    "cudamalloc failed",
    "hipmalloc failed",
    "erroroutofdevicememory",
    "bad_alloc",
)


@dataclass(frozen=True)
class Failure:
    """What went wrong, in the terms the retry needs."""

    memory: bool  # a pool refused an allocation: a smaller plan may load
    devices: frozenset[str] = field(default_factory=frozenset)  # the pools that refused, when the log says
    cancelled: bool = False


def classify(
    message: str, log: Iterable[str] = (), gpu_names: Iterable[str] = (), status: int | None = None
) -> Failure:
    """Read a failure from the engine's message, llama.cpp's error lines and a decode status."""
    if "cancelled" in message:
        return Failure(memory=False, cancelled=True)
    lines = [message, *log]
    text = "\n".join(lines).lower()
    memory = status == DECODE_ALLOC_FAILED or any(word in text for word in _MEMORY_WORDS)
    if not memory:
        return Failure(memory=False)
    return Failure(memory=True, devices=frozenset(_refusing_pools(lines, list(gpu_names))))


def _refusing_pools(lines: list[str], gpu_names: list[str]) -> set[str]:
    pools: set[str] = set()
    for line in lines:
        for buft in _BUFFER.findall(line):
            pool = _pool_of(buft, gpu_names)
            if pool == HOST or pool in gpu_names:  # not "output", "compute" ...
                pools.add(pool)
        for index in _CUDA_DEVICE.findall(line):
            gpus = [g for g in gpu_names if g.startswith(("CUDA", "ROCm"))]
            if int(index) < len(gpus):
                pools.add(gpus[int(index)])
        if "ggml_backend_cpu_buffer_type_alloc_buffer" in line:
            pools.add(HOST)
        if "ggml_metal" in line and "failed to allocate buffer" in line:
            pools.update(g for g in gpu_names if g.startswith(("MTL", "Metal")))
    return pools


def _pool_of(buft: str, gpu_names: list[str]) -> str:
    """A buffer type's name as the device that holds it: CUDA0 -> CUDA0, CUDA_Host and CPU_REPACK -> CPU."""
    if buft.upper().startswith("CPU") or buft.endswith("_Host"):
        return HOST
    for name in gpu_names:
        if buft == name or buft.startswith(name + "_"):
            return name
    return buft


def refusal(text: str) -> str:
    """The allocation that failed, in a user's words ("Vulkan0 could not allocate 335.7 MiB", "host RAM (CPU)
    could not allocate 1.00 GiB"), from the first
    of llama.cpp's lines that gives a buffer's pool and size; "" where none does."""
    from planner.units import format_size

    found = _SIZED.search(text)
    if not found:
        return ""
    pool = found[1]  # a host pool by llama.cpp's name (CPU, CPU_Mapped, Vulkan_Host) is the user's RAM
    where = f"host RAM ({pool})" if pool.upper().startswith("CPU") or pool.endswith("_Host") else pool
    return f"{where} could not allocate {format_size(int(found[2]))}"


def first_line(text: str) -> str:
    """An engine message up to llama.cpp's details (after the first colon)."""
    head, _, _ = text.partition(": ")
    return head if head else text
