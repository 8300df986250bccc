"""This process's memory as the outside world sees it: psutil's RSS, NVML's per-GPU figure, and
what llama.cpp's devices report in use.

Taken before and after a model loads, the difference is what the load cost on
each device, beside the buffer sizes llama.cpp logs (which leave out driver
contexts and library workspaces). pyrsmi reports no per-process figures, so
on AMD GPUs only the device's memory in use is known.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from app.devices import ggml, host, nvml, pci


@dataclass(frozen=True)
class ProcessMemory:
    t: float  # time.monotonic()
    rss: int  # resident set size, bytes (0 when psutil cannot tell)
    # llama.cpp device name -> bytes this process holds there, where a vendor probe can tell (NVML)
    gpu: dict[str, int] = field(default_factory=dict)
    # llama.cpp GPU name -> bytes in use on the whole device (total - free), every process included
    device_used: dict[str, int] = field(default_factory=dict)
    # llama.cpp GPU name -> free bytes as llama.cpp reports them (what learning compares free with)
    device_free: dict[str, int] = field(default_factory=dict)
    # probe -> "ok" or "unavailable: why"
    sources: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "rss": self.rss,
            "gpu": dict(self.gpu),
            "device_used": dict(self.device_used),
            "device_free": dict(self.device_free),
            "sources": dict(self.sources),
        }


def delta(before: ProcessMemory, after: ProcessMemory) -> dict[str, int]:
    """What changed between two snapshots: 'rss', and per device what this process holds
    (NVML) or, failing that, the device's memory in use."""
    out = {"rss": after.rss - before.rss}
    for name, used in after.device_used.items():
        if name in after.gpu:
            out[name] = after.gpu[name] - before.gpu.get(name, 0)
        elif name in before.device_used:
            out[name] = used - before.device_used[name]
    return out


def snapshot(pid: int | None = None, vendor: bool = True) -> ProcessMemory:
    """Never raises: a probe that fails is named in `sources`. vendor=False skips NVML (it takes
    tens of milliseconds to initialise)."""
    pid = os.getpid() if pid is None else pid
    sources: dict[str, str] = {}
    try:
        rss = host.process_rss(pid)
        sources["psutil"] = "ok"
    except Exception as exc:
        rss = 0
        sources["psutil"] = f"unavailable: {exc or type(exc).__name__}"
    try:
        devices = [d for d in ggml.list_devices() if d.is_gpu]
        sources["llama.cpp"] = "ok"
    except Exception as exc:
        devices = []
        sources["llama.cpp"] = f"unavailable: {exc or type(exc).__name__}"
    gpu: dict[str, int] = {}
    if vendor and not devices:
        sources["NVML"] = "not asked: llama.cpp uses no GPU"
    if vendor and devices:
        try:
            nvidia = nvml.list_gpus()
            sources["NVML"] = "ok"
        except Exception as exc:
            nvidia = []
            sources["NVML"] = f"unavailable: {exc}"
        for name, g in pci.match(devices, [g for g in nvidia if not g.error], "cuda").items():
            size = g.processes.get(pid)
            if size is not None:
                gpu[name] = size
    return ProcessMemory(
        time.monotonic(), rss, gpu, {d.name: d.used for d in devices}, {d.name: d.free for d in devices}, sources
    )
