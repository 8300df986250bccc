"""NVIDIA detail through NVML (nvidia-ml-py): memory per GPU and the processes holding it."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from app.devices import pci


@dataclass(frozen=True)
class NvmlGpu:
    """An NVIDIA GPU as NVML reports it, with the processes holding its memory."""

    index: int
    name: str
    total: int
    free: int
    used: int
    pci_bus_id: str | None = None
    # pid -> bytes, for the compute and graphics processes NVML can see (None: NVML cannot tell,
    # as under Windows' WDDM driver model)
    processes: dict[int, int | None] = field(default_factory=dict)
    # whether the process lists could be read at all
    processes_known: bool = True
    # what failed while reading this GPU (its figures are then zero)
    error: str = ""
    # the memory's top clock (MHz) and bus width (bits): its read bandwidth, where NVML reports them
    memory_clock_mhz: int = 0
    bus_width_bits: int = 0

    @property
    def bandwidth(self) -> float | None:
        """Bytes/s: clock x 2 transfers a cycle x bus width (RTX 4090: 10,501 MHz x 2 x 384 bit = 1,008 GB/s)."""
        if self.memory_clock_mhz <= 0 or self.bus_width_bits <= 0:
            return None
        return self.memory_clock_mhz * 1e6 * 2 * self.bus_width_bits / 8

    def used_by_others(self, pid: int | None = None) -> int:
        """Bytes other processes hold: from the process list when NVML gives every size, else all
        memory in use (total - free) less what this process is known to hold."""
        held, _ = self.held_by_others(pid)
        return held

    def held_by_others(self, pid: int | None = None) -> tuple[int, bool]:
        """(bytes, whether they come from the process list) rather than from memory in use."""
        pid = os.getpid() if pid is None else pid
        if self.processes_known and all(size is not None for size in self.processes.values()):
            return sum(size or 0 for p, size in self.processes.items() if p != pid), True
        own = self.processes.get(pid) or 0
        return max(self.total - self.free - own, 0), False


# where a Linux NVIDIA driver shows itself (the kernel module, its control node, WSL's GPU bridge)
_DRIVER_MARKS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg")


def _no_driver_here() -> bool:
    """A Linux machine with no trace of an NVIDIA driver: NVML cannot work, so it is not imported
    (pynvml's import and library search cost every plan about 10 ms). A pynvml already imported,
    or put in place by a test, is always asked."""
    return (
        sys.platform.startswith("linux")
        and "pynvml" not in sys.modules
        and not any(os.path.exists(mark) for mark in _DRIVER_MARKS)
    )


def _nvml() -> Any:
    """pynvml, initialised; the caller shuts it down."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _processes(nv: Any, handle: Any) -> tuple[dict[int, int | None], bool]:
    out: dict[int, int | None] = {}
    known = False
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            procs = getattr(nv, fn)(handle)
        except Exception:
            continue
        known = True
        for proc in procs:
            pid, size = int(proc.pid), proc.usedGpuMemory
            size = None if size is None else int(size)
            if pid in out:
                # a process doing both compute and graphics is listed twice, with the same memory
                sizes = [s for s in (out[pid], size) if s is not None]
                out[pid] = max(sizes) if sizes else None
            else:
                out[pid] = size
    return out, known


def _read_gpu(nv: Any, index: int) -> NvmlGpu:
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        name = _text(nv.nvmlDeviceGetName(handle))
        mem = nv.nvmlDeviceGetMemoryInfo(handle)
    except Exception as exc:  # a GPU fallen off the bus, lost, or in reset
        return NvmlGpu(index, f"GPU{index}", 0, 0, 0, error=_reason(exc))
    bus_id = None
    with contextlib.suppress(Exception):
        bus_id = pci.normalize(nv.nvmlDeviceGetPciInfo(handle).busId)
    processes, known = _processes(nv, handle)
    clock = width = 0
    with contextlib.suppress(Exception):  # not every GPU or driver reports them
        clock = int(nv.nvmlDeviceGetMaxClockInfo(handle, getattr(nv, "NVML_CLOCK_MEM", 2)))
        width = int(nv.nvmlDeviceGetMemoryBusWidth(handle))
    return NvmlGpu(
        index, name, int(mem.total), int(mem.free), int(mem.used), bus_id, processes, known, "", clock, width
    )


def list_gpus() -> list[NvmlGpu]:
    """All NVIDIA GPUs the driver reports. Raises RuntimeError with the reason when NVML is unusable;
    a single GPU that cannot be read is listed with its `error`."""
    if _no_driver_here():
        raise RuntimeError("no NVIDIA driver (libnvidia-ml not found)")
    try:
        nv = _nvml()
    except ImportError:
        raise RuntimeError("nvidia-ml-py is not installed") from None
    except Exception as exc:  # pynvml raises its own NVMLError subclasses
        raise RuntimeError(_reason(exc)) from None
    try:
        return [_read_gpu(nv, i) for i in range(nv.nvmlDeviceGetCount())]
    except Exception as exc:
        raise RuntimeError(_reason(exc)) from None
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def driver_version() -> str:
    """The NVIDIA driver's version ("580.159.04"); RuntimeError when NVML is unusable."""
    if _no_driver_here():
        raise RuntimeError("no NVIDIA driver (libnvidia-ml not found)")
    try:
        nv = _nvml()
    except Exception as exc:
        raise RuntimeError(str(exc) or type(exc).__name__) from None
    try:
        return _text(nv.nvmlSystemGetDriverVersion())
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
    return {g.index: size for g in gpus if (size := g.processes.get(pid)) is not None}


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    kind = type(exc).__name__
    if "Library Not Found" in text or "LibraryNotFound" in kind:
        return "no NVIDIA driver (libnvidia-ml not found)"
    if "Driver Not Loaded" in text or "DriverNotLoaded" in kind:
        return "the NVIDIA driver is not loaded"
    if "Insufficient Permissions" in text or "NoPermission" in kind:
        return "no permission to query the NVIDIA driver"
    if "GPU is lost" in text or "GpuIsLost" in kind:
        return "the GPU is lost (fallen off the bus or hung): reboot or reset it"
    return f"NVML error: {text}"
