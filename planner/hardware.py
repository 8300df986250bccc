"""The hardware a plan is made for (GPUs and host memory): plain data, filled by `app.devices` or by a what-if."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.units import format_size as format_size  # re-exported: its home is units

if TYPE_CHECKING:
    from planner.op_support import OpTable

GiB = 1024**3
MiB = 1024**2
HOST = "CPU"  # the host's memory, named as llama.cpp names it (its buffers and its device)


@dataclass(frozen=True)
class LearnedOverhead:
    """What one GPU held beyond llama.cpp's buffers in earlier loads on this machine (recorded by
    app.devices.learned_overhead, per device, driver and build). Peaks: a figure that grows is kept."""

    context: int  # after a load: the backend's context and whatever else the load took beside its buffers
    runtime_flash_attn: int | None = None  # growth through a reply, graphs with flash attention and no experts
    runtime_cublas: int | None = None  # growth through a reply, graphs without flash attention or with experts
    loads: int = 0
    replies: int = 0
    raised_by: str = ""  # "a failed load", "a drift alarm" when the last raise came from one


@dataclass(frozen=True)
class Device:
    """One memory pool llama.cpp can place buffers in."""

    name: str  # llama.cpp's device name: CUDA0, ROCm0, Metal, Vulkan0, CPU
    kind: str  # "gpu" or "host"
    backend: str  # cuda, rocm, metal, vulkan, cpu
    total: int
    free: int
    # Apple unified memory: the GPU's pool is the host's RAM, counted once
    unified: bool = False
    description: str = ""
    simulated: bool = False
    # an RPC server's device that is that machine's CPU: llama.cpp offloads to it as to a GPU, but it is none
    remote_cpu: bool = False
    # the GPU's identity, read from the device (the driver API, sysfs) or from planner.cards for a what-if;
    # the backend's own overhead is derived from it (planner.gpu_overhead)
    sm_count: int | None = None  # streaming multiprocessors (NVIDIA) or compute units (AMD)
    threads_per_sm: int | None = None  # the most threads resident on one SM / CU
    compute_capability: str | None = None  # "8.9" (NVIDIA) or a gfx target, "gfx1100" (AMD)
    card: str = ""  # the card's name, as the driver or planner.cards names it
    driver: str = ""  # the driver's version, when known
    # memory bandwidth in bytes/s, and where the figure comes from ("spec sheet", "measured" ...)
    bandwidth: float | None = None
    bandwidth_source: str = ""
    learned: LearnedOverhead | None = None
    # what its buffers allow, as ggml reports them (app.devices.buffer_limits); None: the backend's defaults
    buffer_alignment: int | None = None
    host_buffer: str | None = None  # the pinned host buffer type's name; None: the backend's usual one
    host_alignment: int | None = None
    max_tensor_bytes: int | None = None  # an op touching a larger tensor runs on the CPU; None: no limit
    # which of the model's ops the device runs, as it answered (planner.op_support, asked by app.devices.op_table);
    # None: the backend's rules decide (planner.gpu_ops)
    op_support: OpTable | None = field(default=None, compare=False, repr=False)

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"


@dataclass(frozen=True)
class Host:
    """Host RAM, and what the CPU can do with weights (repacking for SIMD)."""

    total: int
    free: int
    cpu_features: frozenset[str] = field(default_factory=frozenset)
    swap_free: int = 0
    simulated: bool = False


def parse_bandwidth(text: str) -> float:
    """Parse a memory bandwidth like 1008GB/s, 936 GB/s, 3.35TB/s, 900GiB/s or 448 (GB/s) into bytes/s.

    Spec sheets quote decimal units (1 GB/s = 10^9 bytes/s); GiB/s and TiB/s are binary."""
    s = text.strip().replace(" ", "").lower()
    if s.endswith(("/s", "ps")):
        s = s[:-2]
    units = {"": 1e9, "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "gib": float(GiB), "tib": 1024.0 * GiB}
    i = len(s)
    while i > 0 and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    number, unit = s[:i], s[i:]
    if unit not in units:
        raise ValueError(f"unknown bandwidth unit in {text!r} (use GB/s, TB/s or GiB/s)")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a bandwidth: {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise ValueError(f"bandwidth must be positive: {text!r}")
    return value * units[unit]


def parse_size(text: str) -> int:
    """Parse sizes like 8GiB, 24G, 12000MiB, 512M, 1.5TB (binary units) into bytes."""
    s = text.strip().replace(" ", "")
    if not s:
        raise ValueError("empty size")
    units = {
        "": 1,
        "b": 1,
        "k": 1024,
        "kb": 1024,
        "kib": 1024,
        "m": MiB,
        "mb": MiB,
        "mib": MiB,
        "g": GiB,
        "gb": GiB,
        "gib": GiB,
        "t": 1024 * GiB,
        "tb": 1024 * GiB,
        "tib": 1024 * GiB,
    }
    i = len(s)
    while i > 0 and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    number, unit = s[:i], s[i:].lower()
    if unit not in units:
        raise ValueError(f"unknown size unit {unit!r} in {text!r} (use B, KiB, MiB, GiB or TiB)")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a size: {text!r}") from None
    if value <= 0 or value != value or value == float("inf"):
        raise ValueError(f"size must be positive: {text!r}")
    return int(value * units[unit])
