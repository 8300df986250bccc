"""Free memory per backend as a load will find it, compared free with free (never total with total).

llama.cpp's own figure is the start (`ggml_backend_dev_memory`); where a backend's figure is known
to be wrong, a better one from the same machine replaces it, and the plan's notes say so:

- CUDA: the probe reads NVML's free memory (app.devices.ggml). On Windows llama.cpp's figure is the
  WDDM budget (0.3-3.2 GiB below NVML's) and is kept: a load gets that budget. NVML gives no
  per-process figures under WDDM, lists no processes under WSL2, and host PIDs in containers:
  there the overhead is learned from llama.cpp's free memory instead (app.devices.learned_overhead).
- ROCm: `hipMemGetInfo` misses VRAM the desktop, Vulkan or OpenGL hold; the amdgpu driver's
  `mem_info_vram_used` (sysfs) sees it. An APU's memory is host RAM: one pool, counted once.
- Vulkan: free is the driver's memory budget (VK_EXT_memory_budget), else the whole heap; the
  budget is wrong on NVIDIA under Windows (total - 768 MiB whatever others hold) and on Intel iGPUs
  under Windows. Where NVML or sysfs see the same card, their free memory is compared.
- Metal: free is macOS's recommended working set (about 2/3 of RAM up to 32 GB, 3/4 to 96 GB, up to
  84% from 128 GB) less what this process allocated; other apps are invisible. A model that would fit
  above it gets the `sudo sysctl iogpu.wired_limit_mb` advice.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import replace

from app.devices import pci
from app.devices.amd_sysfs import AmdGpu
from app.devices.nvml import NvmlGpu
from planner.hardware import Device, GiB, Host, MiB, format_size

NOISE = 64 * MiB  # differences below this are left alone


def in_wsl() -> bool:
    try:
        return "microsoft" in os.uname().release.lower() or os.path.exists("/dev/dxg")
    except AttributeError:
        return False


def _by_bus(items: Sequence[NvmlGpu] | Sequence[AmdGpu]) -> dict[str, NvmlGpu | AmdGpu]:
    return {b: g for g in items if (b := pci.normalize(g.pci_bus_id))}


def reconcile(
    gpus: list[Device],
    bus_ids: dict[str, str | None],
    nvidia: Sequence[NvmlGpu],
    amd: Sequence[AmdGpu],
    host: Host,
    platform: str = sys.platform,
    wsl: bool | None = None,
) -> tuple[list[Device], list[str]]:
    """The devices with free memory a load will find, and one note per correction or caveat.
    `bus_ids`: device name -> its PCI bus id (from llama.cpp)."""
    wsl = in_wsl() if wsl is None else wsl
    nv = _by_bus([g for g in nvidia if not g.error])
    sysfs = _by_bus(list(amd))
    out, notes = [], []
    for d in gpus:
        bus = pci.normalize(bus_ids.get(d.name))
        vendor = nv.get(bus or "") or sysfs.get(bus or "")
        if d.backend in ("rocm", "vulkan") and isinstance(vendor, AmdGpu):
            d, note = _amd(d, vendor, host)
            notes += note
        if d.backend == "vulkan":
            d, note = _vulkan(d, vendor if isinstance(vendor, NvmlGpu) else None, platform)
            notes += note
        if d.backend == "cuda":
            notes += _cuda(d, vendor if isinstance(vendor, NvmlGpu) else None, platform, wsl)
        if d.backend == "metal" and d.unified and host.total:
            notes.append(
                f"{d.name}: the GPU may use macOS's recommended working set, {format_size(d.total)} of "
                f"{format_size(host.total)} unified memory ({d.total / host.total:.0%}); "
                "`sudo sysctl iogpu.wired_limit_mb=N` raises it until the next restart"
            )
        if d.free > d.total > 0:  # some APUs report more free than total
            notes.append(
                f"{d.name}: reports {format_size(d.free)} free of {format_size(d.total)}; planned with the total"
            )
            d = replace(d, free=d.total)
        out.append(d)
    return out, notes


def _amd(d: Device, g: AmdGpu, host: Host) -> tuple[Device, list[str]]:
    notes = []
    if g.apu:
        free = min(d.free, host.free) if host.free else d.free
        notes.append(
            f"{d.name}: an APU whose memory is host RAM ({format_size(g.vram_total)} carve-out, "
            f"{format_size(g.gtt_total)} through GTT): one pool with the host, counted once"
        )
        return replace(d, unified=True, free=free), notes
    if g.vram_free + NOISE < d.free:
        notes.append(
            f"{d.name}: {format_size(d.free - g.vram_free)} more in use than llama.cpp sees (the desktop, Vulkan "
            "or OpenGL, which hipMemGetInfo misses): planned with the amdgpu driver's figure (sysfs mem_info_vram_used)"
        )
        d = replace(d, free=g.vram_free)
    return d, notes


def _vulkan(d: Device, nvidia: NvmlGpu | None, platform: str) -> tuple[Device, list[str]]:
    notes = []
    if nvidia is not None and nvidia.free + NOISE < d.free:
        notes.append(
            f"{d.name}: the Vulkan memory budget says {format_size(d.free)} free, NVML {format_size(nvidia.free)}; "
            "planned with NVML's"
        )
        d = replace(d, free=nvidia.free)
    text = d.description.lower()
    if platform == "win32" and "nvidia" in text:
        notes.append(
            f"{d.name}: Vulkan on NVIDIA under Windows reports a budget of the total less 768 MiB, whatever "
            "other programs hold" + ("" if nvidia else "; NVML could not check it")
        )
    elif platform == "win32" and "intel" in text:
        notes.append(f"{d.name}: Intel's Vulkan driver under Windows reports a wrong memory budget; leave headroom")
    elif d.free == d.total and nvidia is None:
        notes.append(
            f"{d.name}: reports its whole heap as free (no VK_EXT_memory_budget): what other programs hold is "
            "invisible to the plan"
        )
    return d, notes


def _cuda(d: Device, nvidia: NvmlGpu | None, platform: str, wsl: bool) -> list[str]:
    if platform == "win32":
        return [
            f"{d.name}: Windows (WDDM): free memory is llama.cpp's, the WDDM budget (NVML's is higher); NVML has no "
            "per-process figure here, so the overhead is learned from llama.cpp's free memory. The driver may move "
            "an over-allocation to shared system memory (5-20x slower) instead of failing: the drift alarm watches"
        ]
    if wsl:
        return [
            f"{d.name}: WSL2: NVML lists no processes, so the overhead is learned from the free memory before and "
            "after a load; WSL2 does not spill to shared memory, an over-allocation fails"
        ]
    if nvidia is not None and not nvidia.processes_known:
        return [
            f"{d.name}: NVML lists no processes here (a container?): the overhead is learned from the free memory "
            "before and after a load"
        ]
    return []


def wired_limit_advice(device: Device, need: int, ram: int) -> str | None:
    """For a Metal GPU whose working set is too small for `need` bytes (planned + margin) that the Mac's
    RAM could hold (leaving macOS an eighth of it, at least 4 GiB): the command that raises it."""
    if device.backend != "metal" or not device.unified or need <= device.total or ram <= 0:
        return None
    keep = max(4 * GiB, ram // 8)
    if need > ram - keep:
        return None
    limit = -(-need // (1024 * MiB)) * 1024  # whole GiB, in MiB
    return (
        f"{device.name}: a full GPU load needs {format_size(need)}, above macOS's GPU working set "
        f"({format_size(device.total)} of {format_size(ram)}). It fits if you raise the limit until the next "
        f"restart: sudo sysctl iogpu.wired_limit_mb={limit} (leaves {format_size(ram - limit * MiB)} to macOS)"
    )
