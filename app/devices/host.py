"""Host RAM and swap (/proc/meminfo on Linux, psutil elsewhere); the CPU's SIMD features; Apple unified memory."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class HostMemory:
    """The host's RAM and swap, and its CPU's name."""

    total: int
    available: int
    swap_total: int
    swap_free: int
    cpu_name: str
    unified: bool  # Apple silicon: the GPU shares this memory


def read_host() -> HostMemory:
    total, available, swap_total, swap_free = _meminfo() or _psutil_memory()
    return HostMemory(
        total,
        available,
        swap_total,
        swap_free,
        cpu_name(),
        apple_silicon(),
    )


def apple_silicon() -> bool:
    """A Mac with Apple's own chip, whose GPU shares the RAM."""
    return sys.platform == "darwin" and os.uname().machine == "arm64"


def _meminfo() -> tuple[int, int, int, int] | None:
    """RAM and swap from Linux's /proc/meminfo, the figures psutil reads there, without importing
    psutil (a fifth of a plan's start). None where the file or a field is missing."""
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
        kib = {key: int(fields[key].split()[0]) * 1024 for key in ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree")}
    except (OSError, KeyError, ValueError, IndexError):
        return None
    return kib["MemTotal"], kib["MemAvailable"], kib["SwapTotal"], kib["SwapFree"]


def _psutil_memory() -> tuple[int, int, int, int]:
    import psutil

    vm = psutil.virtual_memory()
    try:
        sw = psutil.swap_memory()
        swap_total, swap_free = int(sw.total), int(sw.free)
    except (RuntimeError, OSError):
        swap_total = swap_free = 0
    return int(vm.total), int(vm.available), swap_total, swap_free


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform  # rarely needed, and its import compiles a dozen patterns

    return platform.processor() or platform.machine()


def cpuinfo_features() -> frozenset[str]:
    """SIMD features from /proc/cpuinfo, for when llama.cpp's own answer is not at hand."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return frozenset()
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags.update(line.split(":", 1)[1].split())
            break
    out = set()
    mapping = {
        "avx": "avx",
        "avx2": "avx2",
        "avx512f": "avx512",
        "fma": "fma",
        "f16c": "f16c",
        "asimd": "neon",
        "asimddp": "dotprod",
        "i8mm": "i8mm",
        "sve": "sve",
        "avx512_vnni": "avx512_vnni",
        "avx512_bf16": "avx512_bf16",
        "amx_int8": "amx_int8",
    }
    for flag, feature in mapping.items():
        if flag in flags:
            out.add(feature)
    return frozenset(out)


def process_rss(pid: int | None = None) -> int:
    import psutil

    return int(psutil.Process(pid or os.getpid()).memory_info().rss)


def rss_reader(pid: int | None = None) -> Callable[[], int]:
    """A cheap repeated RSS read (one psutil.Process, kept), for the telemetry sampler."""
    import psutil

    proc = psutil.Process(pid or os.getpid())
    return lambda: int(proc.memory_info().rss)


def ram_in_use() -> tuple[int, int]:
    """(used, total) of host RAM, where used is what is not available to a new allocation."""
    import psutil

    vm = psutil.virtual_memory()
    return int(vm.total) - int(vm.available), int(vm.total)
