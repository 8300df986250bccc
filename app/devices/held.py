"""Memory held by others: which vendor GPU is which llama.cpp device, and what others hold on it.

The plan already uses free memory; these figures explain the gap between free
and total. Where NVML lists every process with its memory, "others" is exact;
elsewhere it is all memory in use (total - free), which also counts the driver's
own reservations.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a report is read without the probes (app.devices): only their types are named here
    from app.devices.ggml import GGMLDevice
    from app.devices.nvml import NvmlGpu
    from app.devices.rocm import RocmGpu

FROM_PROCESSES = "NVML process list"
FROM_DEVICE = "memory in use (total - free)"
FROM_ROCM = "pyrsmi: VRAM in use"
FROM_HOST = "RAM in use (total - available)"
SIMULATED = "simulated"


@dataclass(frozen=True)
class HeldMemory:
    """Bytes other processes hold on one device, and how vramchat knows."""

    bytes: int
    source: str  # one of the FROM_* strings above, or SIMULATED
    processes: int | None = None  # other processes holding memory there, when a process list exists

    def to_json(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "source": self.source, "processes": self.processes}


def from_nvml(gpu: NvmlGpu, pid: int | None = None) -> HeldMemory:
    pid = os.getpid() if pid is None else pid
    held, exact = gpu.held_by_others(pid)
    others = len([p for p in gpu.processes if p != pid]) if gpu.processes_known else None
    return HeldMemory(held, FROM_PROCESSES if exact else FROM_DEVICE, others)


def from_rocm(gpu: RocmGpu) -> HeldMemory:
    # pyrsmi gives no per-process figures: everything in use counts
    return HeldMemory(gpu.vram_used, FROM_ROCM)


def from_device(device: GGMLDevice) -> HeldMemory:
    return HeldMemory(device.used, FROM_DEVICE)


def held_on_gpus(
    devices: Sequence[GGMLDevice], nvidia: Sequence[NvmlGpu], amd: Sequence[RocmGpu]
) -> dict[str, HeldMemory]:
    """Per llama.cpp GPU: the best figure a probe gives. Unified-memory GPUs (Metal, integrated)
    are left out: what others hold there is host RAM, reported with the host."""
    from app.devices.pci import match

    nv = match(devices, [g for g in nvidia if not g.error], "cuda")
    rs = match(devices, list(amd), "rocm")
    out: dict[str, HeldMemory] = {}
    for d in devices:
        if d.type != "gpu" or d.backend == "metal":
            continue
        if d.name in nv:
            out[d.name] = from_nvml(nv[d.name])
        elif d.name in rs:
            out[d.name] = from_rocm(rs[d.name])
        else:
            out[d.name] = from_device(d)
    return out
