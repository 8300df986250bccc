"""Who each of llama.cpp's GPUs is: SMs (or compute units), threads per SM, compute capability or gfx
target, driver. The planner derives the backend's own memory from it (planner.gpu_overhead).

NVIDIA: the CUDA driver API (app.devices.cuda_driver), and NVML for the driver's version; AMD: the
amdgpu driver's sysfs (app.devices.amd_sysfs). Joined to llama.cpp's devices by PCI bus id, by order
among a backend's devices where an id is missing. Runs where llama.cpp's GPU backends are loaded
(the device probe's child, the engine): never where it would make a GPU context in the app.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from functools import lru_cache

from app.devices import amd_sysfs, cuda_driver, pci
from app.devices.ggml_device import GGMLDevice


@lru_cache(maxsize=1)
def _cuda() -> tuple[cuda_driver.CudaDevice, ...]:
    try:
        return tuple(cuda_driver.read_devices())
    except (OSError, AttributeError):
        return ()


@lru_cache(maxsize=1)
def _nvidia_driver() -> str:
    from app.devices import nvml

    with contextlib.suppress(Exception):
        return nvml.driver_version()
    return ""


@lru_cache(maxsize=1)
def _amd() -> tuple[amd_sysfs.AmdGpu, ...]:
    return tuple(amd_sysfs.read_gpus())


def _cuda_identity(
    devices: list[GGMLDevice], cuda: tuple[cuda_driver.CudaDevice, ...]
) -> dict[str, cuda_driver.CudaDevice]:
    by_bus = {c.pci_bus_id: c for c in cuda if c.pci_bus_id}
    out: dict[str, cuda_driver.CudaDevice] = {}
    for d in devices:
        bus = pci.normalize(d.device_id)
        if bus in by_bus:
            out[d.name] = by_bus[bus]  # type: ignore[index]
    rest = [c for c in cuda if c not in out.values()]
    unmatched = [d for d in devices if d.backend == "cuda" and d.name not in out and not d.device_id]
    out.update({d.name: c for d, c in zip(unmatched, rest)})
    return out


def enrich(devices: list[GGMLDevice]) -> list[GGMLDevice]:
    """llama.cpp's devices with their identity filled in where a source knows it."""
    if not any(d.is_gpu and d.backend in ("cuda", "rocm", "vulkan") for d in devices):
        return devices
    cuda = _cuda_identity(devices, _cuda()) if any(d.backend in ("cuda", "vulkan") for d in devices) else {}
    amd = {g.pci_bus_id: g for g in _amd()} if any(d.backend in ("rocm", "vulkan") for d in devices) else {}
    out = []
    for d in devices:
        c = cuda.get(d.name)
        a = amd.get(pci.normalize(d.device_id) or "")
        if c is not None:
            driver = _nvidia_driver()
            d = replace(
                d,
                sm_count=c.sm_count,
                threads_per_sm=c.threads_per_sm,
                compute_capability=c.compute_capability,
                driver=f"{driver} ({c.driver})" if driver else c.driver,
                card=c.name,
            )
        elif a is not None:
            d = replace(d, sm_count=a.cu_count, compute_capability=a.gfx_target, driver=a.driver)
        out.append(d)
    return out
