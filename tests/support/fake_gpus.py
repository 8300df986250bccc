"""Stand-ins for pynvml and pyrsmi's rocml, and for llama.cpp's device list, for machines without GPUs.

They answer the calls app.devices makes, with the shapes the real libraries
return, and can fail where the real ones fail: at init (no driver), for one
GPU (lost), or in one call (process lists).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field

import pytest

from app.devices import ggml
from app.devices.ggml import GGMLDevice
from planner.hardware import Device, format_size
from planner.units import DEVICE_PREFIX

GiB = 1024**3
MiB = 1024**2


# the class names are pynvml's and pyrsmi's own: app.devices reads reasons from them
class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    def __str__(self) -> str:
        return "NVML Shared Library Not Found"


class NVMLError_DriverNotLoaded(NVMLError):
    def __str__(self) -> str:
        return "Driver Not Loaded"


class NVMLError_GpuIsLost(NVMLError):
    def __str__(self) -> str:
        return "GPU is lost"


@dataclass
class FakeNvidia:
    name: str = "NVIDIA GeForce RTX 4090"
    total: int = 24 * GiB
    used: int = 0
    bus_id: str = "00000000:01:00.0"
    compute: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, usedGpuMemory)
    graphics: list[tuple[int, int | None]] = field(default_factory=list)
    lost: bool = False
    process_lists_fail: bool = False
    memory_clock_mhz: int = 10501  # an RTX 4090's: 10,501 MHz x 2 x 384 bit = 1,008 GB/s
    bus_width_bits: int = 384


def fake_pynvml(
    gpus: list[FakeNvidia], init_error: Exception | None = None, count_error: Exception | None = None
) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    nv.NVMLError = NVMLError  # type: ignore[attr-defined]
    nv.shutdowns = 0  # type: ignore[attr-defined]

    def init() -> None:
        if init_error is not None:
            raise init_error

    def shutdown() -> None:
        nv.shutdowns += 1  # type: ignore[attr-defined]

    def count() -> int:
        if count_error is not None:
            raise count_error
        return len(gpus)

    def handle(i: int) -> FakeNvidia:
        if gpus[i].lost:
            raise NVMLError_GpuIsLost()
        return gpus[i]

    def memory(h: FakeNvidia) -> types.SimpleNamespace:
        return types.SimpleNamespace(total=h.total, free=h.total - h.used, used=h.used)

    def processes(kind: str):
        def get(h: FakeNvidia) -> list[types.SimpleNamespace]:
            if h.process_lists_fail:
                raise NVMLError("Not Supported")
            return [types.SimpleNamespace(pid=pid, usedGpuMemory=size) for pid, size in getattr(h, kind)]

        return get

    nv.nvmlInit = init  # type: ignore[attr-defined]
    nv.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    nv.nvmlDeviceGetCount = count  # type: ignore[attr-defined]
    nv.nvmlDeviceGetHandleByIndex = handle  # type: ignore[attr-defined]
    nv.nvmlDeviceGetName = lambda h: h.name  # type: ignore[attr-defined]
    nv.nvmlDeviceGetMemoryInfo = memory  # type: ignore[attr-defined]
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=h.bus_id.encode())  # type: ignore[attr-defined]
    nv.NVML_CLOCK_MEM = 2  # type: ignore[attr-defined]
    nv.nvmlDeviceGetMaxClockInfo = lambda h, kind: h.memory_clock_mhz if kind == 2 else 2520  # type: ignore[attr-defined]
    nv.nvmlDeviceGetMemoryBusWidth = lambda h: h.bus_width_bits  # type: ignore[attr-defined]
    nv.nvmlDeviceGetComputeRunningProcesses = processes("compute")  # type: ignore[attr-defined]
    nv.nvmlDeviceGetGraphicsRunningProcesses = processes("graphics")  # type: ignore[attr-defined]
    return nv


class ROCMLError_LibraryNotFound(Exception):
    pass


@dataclass
class FakeAmd:
    name: str = "Radeon RX 7900 XTX"
    vram_total: int = 24 * GiB
    vram_used: int = 1 * GiB
    gtt_total: int = 16 * GiB
    gtt_used: int = 100 * MiB
    bdf: int = (0 << 32) | (0x03 << 8) | (0 << 3) | 0


def fake_rocml(
    gpus: list[FakeAmd], init_error: Exception | None = None, count_error: Exception | None = None
) -> types.ModuleType:
    r = types.ModuleType("pyrsmi.rocml")
    r.shutdowns = 0  # type: ignore[attr-defined]

    def init() -> None:
        if init_error is not None:
            raise init_error

    def shutdown() -> None:
        r.shutdowns += 1  # type: ignore[attr-defined]

    def count() -> int:
        if count_error is not None:
            raise count_error
        return len(gpus)

    def total(i: int, kind: str = "VRAM") -> int:
        return gpus[i].vram_total if kind == "VRAM" else gpus[i].gtt_total

    def used(i: int, kind: str = "VRAM") -> int:
        return gpus[i].vram_used if kind == "VRAM" else gpus[i].gtt_used

    r.smi_initialize = init  # type: ignore[attr-defined]
    r.smi_shutdown = shutdown  # type: ignore[attr-defined]
    r.smi_get_device_count = count  # type: ignore[attr-defined]
    r.smi_get_device_name = lambda i: gpus[i].name  # type: ignore[attr-defined]
    r.smi_get_device_memory_total = total  # type: ignore[attr-defined]
    r.smi_get_device_memory_used = used  # type: ignore[attr-defined]
    r.smi_get_device_pci_id = lambda i: gpus[i].bdf  # type: ignore[attr-defined]
    return r


def install_nvml(monkeypatch: pytest.MonkeyPatch, module: types.ModuleType | None) -> None:
    """Make `import pynvml` give `module` (None: as if nvidia-ml-py were not installed)."""
    monkeypatch.setitem(sys.modules, "pynvml", module)


def install_rocml(monkeypatch: pytest.MonkeyPatch, module: types.ModuleType | None, driver_loaded: bool = True) -> None:
    """Make `from pyrsmi import rocml` give `module` (None: as if pyrsmi were not installed)."""
    from app.devices import rocm

    if module is None:
        monkeypatch.setitem(sys.modules, "pyrsmi", None)
    else:
        package = types.ModuleType("pyrsmi")
        package.rocml = module  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pyrsmi", package)
        monkeypatch.setitem(sys.modules, "pyrsmi.rocml", module)
    monkeypatch.setattr(rocm, "_driver_loaded", lambda: driver_loaded)


def cpu_device() -> GGMLDevice:
    return GGMLDevice("CPU", "Fake CPU", "cpu", 64 * GiB, 64 * GiB)


def install_llama_devices(monkeypatch: pytest.MonkeyPatch, devices: list[GGMLDevice] | Exception) -> None:
    """Make llama.cpp's device list (and the telemetry's GPU read) answer with `devices`."""

    def listing() -> list[GGMLDevice]:
        if isinstance(devices, Exception):
            raise devices
        return list(devices)

    def gpu_memory() -> dict[str, tuple[int, int]]:
        return {d.name: (d.free, d.total) for d in listing() if d.is_gpu}

    monkeypatch.setattr(ggml, "list_devices", listing)
    monkeypatch.setattr(ggml, "gpu_memory", gpu_memory)
    # what the process listed last (the app matches vendor readings to it): these devices
    monkeypatch.setattr(ggml, "_last_devices", [] if isinstance(devices, Exception) else list(devices))


def simulated_gpus(sizes: list[int], backend: str = "cuda") -> list[Device]:
    """What-if GPUs with all their memory free."""
    prefix = DEVICE_PREFIX.get(backend, "GPU")
    return [
        Device(
            f"{prefix}{i}", "gpu", backend, size, size, description=f"simulated {format_size(size)} GPU", simulated=True
        )
        for i, size in enumerate(sizes)
    ]
