"""What memory is free where.

Every probe is optional: a missing library or driver is recorded as
"unavailable: why" and the others go on. The planner's devices are the ones
llama.cpp itself can use (the ggml device API); NVML and pyrsmi add what other
processes hold and catch a GPU that llama.cpp was built without.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from app.devices import advice, ggml, host, nvml, rocm
from app.devices.simulated import ENV_VAR, SimulatedSpec, parse_devices
from planner.devices import Device, Host, format_size


@dataclass
class Probe:
    name: str  # llama.cpp, NVML, ROCm (pyrsmi), Metal, host
    available: bool
    detail: str
    devices: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DeviceReport:
    gpus: list[Device]
    host: Host
    probes: list[Probe]
    warnings: list[str] = field(default_factory=list)
    # device name -> bytes other processes hold on it (when a vendor probe can tell)
    held_by_others: dict[str, int] = field(default_factory=dict)
    simulated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "simulated": self.simulated,
            "gpus": [{"name": d.name, "backend": d.backend, "total": d.total, "free": d.free,
                      "unified": d.unified, "description": d.description,
                      "held_by_others": self.held_by_others.get(d.name)} for d in self.gpus],
            "host": {"total": self.host.total, "free": self.host.free, "swap_free": self.host.swap_free,
                     "cpu_features": sorted(self.host.cpu_features)},
            "probes": [{"name": p.name, "available": p.available, "detail": p.detail, "devices": p.devices}
                       for p in self.probes],
            "warnings": list(self.warnings),
        }


def _probe_host(probes: list[Probe]) -> tuple[Host, bool]:
    try:
        mem = host.read_host()
    except Exception as exc:
        probes.append(Probe("host", False, f"unavailable: {exc}"))
        return Host(0, 0), False
    features: frozenset[str]
    try:
        features = ggml.cpu_features()
    except ggml.GGMLUnavailable:
        features = host.cpuinfo_features()
    probes.append(Probe("host", True,
                        f"{format_size(mem.available)} available of {format_size(mem.total)} RAM, "
                        f"swap {format_size(mem.swap_free)} free; {mem.cpu_name}",
                        [{"total": mem.total, "available": mem.available, "swap_total": mem.swap_total,
                          "swap_free": mem.swap_free, "cpu": mem.cpu_name, "features": sorted(features)}]))
    return Host(mem.total, mem.available, features, mem.swap_free), mem.unified


def _probe_llama(probes: list[Probe]) -> list[ggml.GGMLDevice] | None:
    try:
        devices = ggml.list_devices()
    except ggml.GGMLUnavailable as exc:
        probes.append(Probe("llama.cpp", False, f"unavailable: {exc}"))
        return None
    except OSError as exc:
        probes.append(Probe("llama.cpp", False, f"unavailable: {exc}"))
        return None
    gpus = [d for d in devices if d.type in ("gpu", "igpu")]
    detail = ", ".join(f"{d.name} ({d.description}, {format_size(d.free)} free of {format_size(d.total)})"
                       for d in devices) or "no devices"
    if not gpus:
        detail += "; built for the CPU only"
    probes.append(Probe("llama.cpp", True, detail,
                        [{"name": d.name, "description": d.description, "type": d.type, "free": d.free,
                          "total": d.total} for d in devices]))
    return devices


def _probe_nvml(probes: list[Probe]) -> list[nvml.NvmlGpu]:
    try:
        gpus = nvml.list_gpus()
    except RuntimeError as exc:
        probes.append(Probe("NVML", False, f"unavailable: {exc}"))
        return []
    probes.append(Probe("NVML", True, ", ".join(
        f"GPU{g.index} {g.name}: {format_size(g.free)} free of {format_size(g.total)}, "
        f"{format_size(g.used_by_others())} held by other processes" for g in gpus) or "no NVIDIA GPUs",
        [{"index": g.index, "name": g.name, "total": g.total, "free": g.free, "used": g.used,
          "processes": g.processes} for g in gpus]))
    return gpus


def _probe_rocm(probes: list[Probe]) -> list[rocm.RocmGpu]:
    try:
        gpus = rocm.list_gpus()
    except RuntimeError as exc:
        probes.append(Probe("ROCm (pyrsmi)", False, f"unavailable: {exc}"))
        return []
    probes.append(Probe("ROCm (pyrsmi)", True, ", ".join(
        f"GPU{g.index} {g.name}: VRAM {format_size(g.vram_used)} used of {format_size(g.vram_total)}, "
        f"GTT {format_size(g.gtt_used)} of {format_size(g.gtt_total)}" for g in gpus) or "no AMD GPUs",
        [{"index": g.index, "name": g.name, "vram_total": g.vram_total, "vram_used": g.vram_used,
          "gtt_total": g.gtt_total, "gtt_used": g.gtt_used} for g in gpus]))
    return gpus


def _simulated_report(spec: SimulatedSpec, source: str) -> DeviceReport:
    probes: list[Probe] = []
    real_host, _ = _probe_host(probes)
    if spec.ram is not None:
        total, used = spec.ram
        host_dev = Host(total, total - used, real_host.cpu_features, 0, simulated=True)
    else:
        host_dev = real_host
    gpus = spec.devices()
    probes.insert(0, Probe("simulated", True, f"{source}: " + (", ".join(
        f"{d.name} {format_size(d.free)} free of {format_size(d.total)}" for d in gpus) or "no GPU")))
    held = {d.name: d.total - d.free for d in gpus}
    return DeviceReport(gpus, host_dev, probes, held_by_others=held, simulated=True)


def probe_devices(vram: str | None = None, ram: str | None = None, cpu_only: bool = False) -> DeviceReport:
    """Probe this machine, or believe in simulated devices (--vram / VRAMCHAT_DEVICES)."""
    env = os.environ.get(ENV_VAR)
    if vram is not None or env:
        spec = parse_devices(vram if vram is not None else env or "")
        if ram is not None:
            spec.ram = parse_devices(f"ram={ram}").ram
        report = _simulated_report(spec, "--vram" if vram is not None else ENV_VAR)
        if cpu_only:
            report.gpus = []
        return report

    probes: list[Probe] = []
    host_dev, unified = _probe_host(probes)
    if ram is not None:
        spec = parse_devices(f"ram={ram}")
        assert spec.ram is not None
        host_dev = Host(spec.ram[0], spec.ram[0] - spec.ram[1], host_dev.cpu_features, 0, simulated=True)
    llama_devices = _probe_llama(probes)
    nvidia = _probe_nvml(probes)
    amd = _probe_rocm(probes)
    if unified:
        probes.append(Probe("Metal", True, "Apple unified memory: the GPU shares host RAM (counted once)"))
    else:
        probes.append(Probe("Metal", False, "unavailable: not an Apple silicon Mac"))

    gpus: list[Device] = []
    held: dict[str, int] = {}
    warnings: list[str] = []
    for d in llama_devices or []:
        if d.type not in ("gpu", "igpu"):
            continue
        backend = d.backend
        is_unified = backend == "metal" or d.type == "igpu"
        gpus.append(Device(d.name, "gpu", backend, d.total, d.free, unified=is_unified, description=d.description))
    cuda_devices = [g for g in gpus if g.backend == "cuda"]
    for i, g in enumerate(nvidia):
        if i < len(cuda_devices):
            held[cuda_devices[i].name] = g.used_by_others()
    rocm_devices = [g for g in gpus if g.backend == "rocm"]
    for i, g in enumerate(amd):
        if i < len(rocm_devices):
            held[rocm_devices[i].name] = g.vram_used

    if nvidia and not cuda_devices:
        warnings.append(advice.mismatch_message(nvidia[0].name, "cuda"))
    if amd and not rocm_devices and not any(g.backend == "vulkan" for g in gpus):
        warnings.append(advice.mismatch_message(amd[0].name, "rocm"))
    if unified and not any(g.backend == "metal" for g in gpus) and llama_devices is not None:
        warnings.append(advice.mismatch_message("This Mac's GPU", "metal"))
    if cpu_only:
        gpus = []
    return DeviceReport(gpus, host_dev, probes, warnings, held)
