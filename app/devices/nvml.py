"""NVIDIA detail through NVML (nvidia-ml-py): memory per GPU and the processes holding it."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class NvmlGpu:
    index: int
    name: str
    total: int
    free: int
    used: int
    # pid -> bytes, for the compute processes NVML can see
    processes: dict[int, int] = field(default_factory=dict)

    def used_by_others(self, pid: int | None = None) -> int:
        pid = os.getpid() if pid is None else pid
        return sum(size for p, size in self.processes.items() if p != pid)


def _init():  # pragma: no cover - thin wrapper, exercised where a driver exists
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def list_gpus() -> list[NvmlGpu]:
    """All NVIDIA GPUs the driver reports. Raises RuntimeError with the reason when NVML is unusable."""
    try:
        nv = _init()
    except ImportError:
        raise RuntimeError("nvidia-ml-py is not installed") from None
    except Exception as exc:  # pynvml raises its own NVMLError subclasses
        raise RuntimeError(_reason(exc)) from None
    try:
        out = []
        for i in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            name = nv.nvmlDeviceGetName(handle)
            mem = nv.nvmlDeviceGetMemoryInfo(handle)
            processes: dict[int, int] = {}
            try:
                for proc in nv.nvmlDeviceGetComputeRunningProcesses(handle):
                    processes[int(proc.pid)] = int(proc.usedGpuMemory or 0)
            except Exception:
                pass
            out.append(NvmlGpu(i, name.decode() if isinstance(name, bytes) else str(name), int(mem.total),
                               int(mem.free), int(mem.used), processes))
        return out
    except Exception as exc:
        raise RuntimeError(_reason(exc)) from None
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def process_memory(pid: int | None = None) -> dict[int, int]:
    """GPU index -> bytes this process holds, as NVML sees it (empty when NVML is unusable)."""
    pid = os.getpid() if pid is None else pid
    try:
        gpus = list_gpus()
    except RuntimeError:
        return {}
    return {g.index: g.processes[pid] for g in gpus if pid in g.processes}


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if "Library Not Found" in text or "LibraryNotFound" in type(exc).__name__:
        return "no NVIDIA driver (libnvidia-ml not found)"
    if "Driver Not Loaded" in text:
        return "the NVIDIA driver is not loaded"
    return text
