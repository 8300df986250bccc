"""NVIDIA GPUs as the CUDA driver API describes them: SMs, threads per SM, compute capability, PCI id.

Read through ctypes from libcuda with `cuInit` and `cuDeviceGetAttribute`, which create no CUDA context
(unlike `cudaMemGetInfo`, which leaves a primary context of 100-600 MiB in the caller). It runs in the
device probe's child process all the same, beside llama.cpp's own device list. The planner derives the
CUDA context from these attributes (planner.gpu_overhead).
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass

from app.devices import pci

# cuda.h: CUdevice_attribute
MULTIPROCESSOR_COUNT = 16
INTEGRATED = 18
MAX_THREADS_PER_MULTIPROCESSOR = 39
COMPUTE_CAPABILITY_MAJOR = 75
COMPUTE_CAPABILITY_MINOR = 76


@dataclass(frozen=True)
class CudaDevice:
    index: int
    name: str
    sm_count: int
    threads_per_sm: int
    compute_capability: str  # "8.9"
    integrated: bool
    pci_bus_id: str | None
    driver: str  # "CUDA 13.0": the highest CUDA version the driver supports


def _library() -> ctypes.CDLL:
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so", "libcuda.dylib"]
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            errors.append(str(exc))
    raise OSError("; ".join(errors))


def _check(code: int, what: str) -> None:
    if code != 0:
        raise OSError(f"{what} failed (CUresult {code})")


def read_devices(lib: ctypes.CDLL | None = None) -> list[CudaDevice]:
    """Every CUDA device the driver lists. Raises OSError when there is no driver or it refuses."""
    cuda = lib or _library()
    _check(cuda.cuInit(0), "cuInit")
    version = ctypes.c_int()
    _check(cuda.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
    driver = f"CUDA {version.value // 1000}.{version.value % 1000 // 10}"
    count = ctypes.c_int()
    _check(cuda.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    out = []
    for i in range(count.value):
        dev = ctypes.c_int()
        _check(cuda.cuDeviceGet(ctypes.byref(dev), i), "cuDeviceGet")

        def attribute(which: int, dev: ctypes.c_int = dev) -> int:
            value = ctypes.c_int()
            _check(cuda.cuDeviceGetAttribute(ctypes.byref(value), which, dev), "cuDeviceGetAttribute")
            return value.value

        name = ctypes.create_string_buffer(256)
        _check(cuda.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
        bus = ctypes.create_string_buffer(64)
        bus_id = pci.normalize(bus.value.decode()) if cuda.cuDeviceGetPCIBusId(bus, 64, dev) == 0 else None
        out.append(
            CudaDevice(
                i,
                name.value.decode(errors="replace"),
                attribute(MULTIPROCESSOR_COUNT),
                attribute(MAX_THREADS_PER_MULTIPROCESSOR),
                f"{attribute(COMPUTE_CAPABILITY_MAJOR)}.{attribute(COMPUTE_CAPABILITY_MINOR)}",
                bool(attribute(INTEGRATED)),
                bus_id,
                driver,
            )
        )
    return out
