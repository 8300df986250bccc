"""This machine's devices, probed: what memory is free where.

Every probe is optional: a missing library or driver is recorded as
"unavailable: why" and the others go on. The planner's devices are the ones
llama.cpp itself can use (the ggml device API); NVML and pyrsmi add what other
processes hold and catch a GPU that llama.cpp was built without.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from app.devices import advice, amd_sysfs, free_memory, ggml, held, host, learned_overhead, nvml, rocm
from app.devices.bandwidth import with_bandwidth
from app.devices.held import HeldMemory
from app.devices.probes import HOST, DeviceReport, Probe
from app.devices.simulated import ENV_VAR, SimulatedSpec, parse_devices
from planner.hardware import Device, Host, format_size

# backends the planner has buffer rules for; others borrow the nearest rules (and say so)
_PLANNER_BACKENDS = ("cuda", "rocm", "metal", "vulkan")
_BORROWED_RULES = {"musa": "cuda"}


def _unavailable(name: str, exc: BaseException) -> Probe:
    return Probe(name, False, f"unavailable: {exc or type(exc).__name__}")


def _probe_host(probes: list[Probe]) -> tuple[Host, host.HostMemory | None]:
    try:
        mem = host.read_host()
    except Exception as exc:  # psutil missing or failing: plan with what the CPU backend reports
        probes.append(_unavailable("host", exc))
        return Host(0, 0), None
    features: frozenset[str]
    try:
        features = ggml.cpu_features()
    except (ggml.GGMLUnavailable, OSError):
        features = host.cpuinfo_features()
    probes.append(
        Probe(
            "host",
            True,
            f"{format_size(mem.available)} available of {format_size(mem.total)} RAM, "
            f"swap {format_size(mem.swap_free)} free; {mem.cpu_name}",
            [
                {
                    "total": mem.total,
                    "available": mem.available,
                    "swap_total": mem.swap_total,
                    "swap_free": mem.swap_free,
                    "cpu": mem.cpu_name,
                    "features": sorted(features),
                    "unified": mem.unified,
                }
            ],
        )
    )
    return Host(mem.total, mem.available, features, mem.swap_free), mem


def _probe_llama(probes: list[Probe]) -> list[ggml.GGMLDevice] | None:
    try:
        devices = ggml.list_devices()
    except Exception as exc:  # GGMLUnavailable, OSError, or a library that misbehaves
        probes.append(_unavailable("llama.cpp", exc))
        return None
    gpus = [d for d in devices if d.is_gpu]
    detail = (
        ", ".join(f"{d.name} ({d.description}, {format_size(d.free)} free of {format_size(d.total)})" for d in devices)
        or "no devices"
    )
    if not gpus:
        detail += "; built for the CPU only"
    probes.append(
        Probe(
            "llama.cpp",
            True,
            detail,
            [
                {
                    "name": d.name,
                    "description": d.description,
                    "type": d.type,
                    "backend": d.backend,
                    "free": d.free,
                    "total": d.total,
                    "device_id": d.device_id,
                }
                for d in devices
            ],
        )
    )
    return devices


def _probe_nvml(probes: list[Probe]) -> list[nvml.NvmlGpu]:
    try:
        gpus = nvml.list_gpus()
    except Exception as exc:
        probes.append(_unavailable("NVML", exc))
        return []

    def line(g: nvml.NvmlGpu) -> str:
        if g.error:
            return f"GPU{g.index}: {g.error}"
        h = held.from_nvml(g)
        return (
            f"GPU{g.index} {g.name}: {format_size(g.free)} free of {format_size(g.total)}, "
            f"{format_size(h.bytes)} held by others ({h.source})"
        )

    probes.append(
        Probe(
            "NVML",
            True,
            ", ".join(line(g) for g in gpus) or "no NVIDIA GPUs",
            [
                {
                    "index": g.index,
                    "name": g.name,
                    "total": g.total,
                    "free": g.free,
                    "used": g.used,
                    "pci_bus_id": g.pci_bus_id,
                    "processes": {str(p): s for p, s in g.processes.items()},
                    "error": g.error or None,
                }
                for g in gpus
            ],
        )
    )
    return gpus


def _probe_rocm(probes: list[Probe]) -> list[rocm.RocmGpu]:
    try:
        gpus = rocm.list_gpus()
    except Exception as exc:
        probes.append(_unavailable("ROCm (pyrsmi)", exc))
        return []
    probes.append(
        Probe(
            "ROCm (pyrsmi)",
            True,
            ", ".join(
                f"GPU{g.index} {g.name}: VRAM {format_size(g.vram_used)} used of {format_size(g.vram_total)}, "
                f"GTT {format_size(g.gtt_used)} of {format_size(g.gtt_total)}"
                for g in gpus
            )
            or "no AMD GPUs",
            [
                {
                    "index": g.index,
                    "name": g.name,
                    "vram_total": g.vram_total,
                    "vram_used": g.vram_used,
                    "gtt_total": g.gtt_total,
                    "gtt_used": g.gtt_used,
                    "pci_bus_id": g.pci_bus_id,
                }
                for g in gpus
            ],
        )
    )
    return gpus


def _probe_rpc(probes: list[Probe], warnings: list[str]) -> list[Device]:
    """The devices of the RPC servers given with --rpc, asked over the network (in Python, with a
    timeout: never through llama.cpp, whose connection would keep a one-client server busy). Named
    as llama.cpp will name them (RPC0, RPC1 ... in the order given); first in its device list."""
    from app.rpc.endpoint import configured_endpoints

    devices: list[Device] = []
    endpoints = configured_endpoints()
    if not endpoints:
        return devices  # the common case: nothing of the RPC machinery imported on a plan's start
    from app.rpc.client import rpc_available
    from app.rpc.wire import RpcError, query_servers

    if endpoints and not rpc_available():
        from app.native import reinstall_command

        warnings.append(
            "this llama-cpp-python was built without the RPC backend, so it cannot load onto the RPC servers; "
            f"rebuild it with:\n  {reinstall_command()}"
        )
    for endpoint, info in zip(endpoints, query_servers(endpoints)):  # all at once, each within a deadline
        name = f"RPC server {endpoint}"
        if isinstance(info, RpcError):
            probes.append(_unavailable(name, info))
            warnings.append(f"RPC server {endpoint} is left out: {info}")
            continue
        lent = []
        for remote in info.devices:
            device = Device(
                f"RPC{len(devices)}",
                "gpu",
                "rpc",
                remote.total,
                remote.free,
                description=str(endpoint),
                remote_cpu=remote.is_cpu,
            )
            devices.append(device)
            lent.append(device)
        probes.append(
            Probe(
                name,
                True,
                ", ".join(f"{d.name}: {format_size(d.free)} free of {format_size(d.total)}" for d in lent)
                or "lends no devices",
                [
                    {"name": d.name, "endpoint": str(endpoint), "free": d.free, "total": d.total}
                    | {"protocol": ".".join(map(str, info.version))}
                    for d in lent
                ],
            )
        )
    return devices


def _probe_metal(probes: list[Probe], devices: list[ggml.GGMLDevice] | None, mem: host.HostMemory | None) -> None:
    unified = bool(mem and mem.unified)
    metal = [d for d in devices or [] if d.backend == "metal"]
    if not metal:
        if not unified:
            why = "not a Mac" if sys.platform != "darwin" else "no Metal device in this llama-cpp-python"
        elif devices is None:
            why = "llama.cpp could not be asked"
        else:
            why = "this llama-cpp-python was built without Metal"
        probes.append(Probe("Metal", False, f"unavailable: {why}"))
        return
    if unified and mem is not None:
        detail = ", ".join(
            f"{d.name}: GPU working-set limit {format_size(d.total)} of {format_size(mem.total)} "
            f"unified memory ({format_size(d.free)} free); one pool with host RAM, counted once"
            for d in metal
        )
    else:  # an Intel Mac's discrete GPU has memory of its own
        detail = ", ".join(
            f"{d.name}: {format_size(d.free)} free of {format_size(d.total)} (discrete GPU)" for d in metal
        )
    probes.append(
        Probe(
            "Metal",
            True,
            detail,
            [{"name": d.name, "working_set_limit": d.total, "free": d.free, "unified": unified} for d in metal],
        )
    )


def _planner_device(d: ggml.GGMLDevice, apple_silicon: bool, warnings: list[str]) -> Device:
    backend = d.backend
    if backend not in _PLANNER_BACKENDS:
        rules = _BORROWED_RULES.get(backend, "vulkan")
        warnings.append(
            f"{d.name}: vramchat has no buffer rules for the {backend} backend; its figures use "
            f"{rules}'s rules and are estimates"
        )
        backend = rules
    # Apple silicon's GPU and an integrated GPU take their memory out of host RAM
    unified = (d.backend == "metal" and apple_silicon) or d.type == "igpu"
    return Device(
        d.name,
        "gpu",
        backend,
        d.total,
        d.free,
        unified=unified,
        description=d.description,
        sm_count=d.sm_count,
        threads_per_sm=d.threads_per_sm,
        compute_capability=d.compute_capability,
        card=d.card,
        driver=d.driver,
        buffer_alignment=d.buffer_alignment,
        host_buffer=d.host_buffer if d.buffer_alignment is not None else None,
        host_alignment=d.host_alignment,
        max_tensor_bytes=d.max_tensor_bytes,
    )


def _what_if_report(names: Sequence[str], ram: str | None, cpu_only: bool) -> DeviceReport:
    """--gpu: the named cards, with this machine's host (or the Mac's RAM for an Apple chip, or --ram)."""
    from app.devices import what_if

    cards = what_if.cards_for(names)
    report = _simulated_report(_parse(f"ram={ram}", "--ram") if ram is not None else SimulatedSpec(), "--gpu")
    gpus = [] if cpu_only else what_if.devices_for(cards)
    host_dev = report.host if ram is not None else what_if.host_for(cards, report.host)
    held_map = {name: h for name, h in report.held.items() if name == HOST}
    if host_dev is not report.host:
        held_map[HOST] = HeldMemory(0, held.SIMULATED)
    held_map.update({d.name: HeldMemory(0, held.SIMULATED) for d in gpus})
    probes = [Probe("what-if", True, f"--gpu: {what_if.describe(cards)}, all of their memory free")]
    probes += [p for p in report.probes if p.name != "simulated"]
    return DeviceReport(gpus, host_dev, probes, held=held_map, simulated=True)


def _probe_amd_sysfs(probes: list[Probe], llama_gpus: list[ggml.GGMLDevice]) -> list[amd_sysfs.AmdGpu]:
    """The amdgpu driver's own counters, where llama.cpp drives an AMD GPU (ROCm or Vulkan)."""
    if not any(d.backend in ("rocm", "vulkan") for d in llama_gpus):
        return []
    gpus = amd_sysfs.read_gpus()
    if gpus:
        probes.append(
            Probe(
                "amdgpu (sysfs)",
                True,
                ", ".join(
                    f"{g.pci_bus_id} {g.gfx_target or '?'}: VRAM {format_size(g.vram_used)} used of "
                    f"{format_size(g.vram_total)}" + (" (APU)" if g.apu else "")
                    for g in gpus
                ),
            )
        )
    return gpus


def _simulated_report(spec: SimulatedSpec, source: str) -> DeviceReport:
    probes: list[Probe] = []
    real_host, _ = _probe_host(probes)
    held_map: dict[str, HeldMemory] = {}
    if spec.ram is not None:
        total, used = spec.ram
        host_dev = Host(total, total - used, real_host.cpu_features, 0, simulated=True)
        held_map[HOST] = HeldMemory(used, held.SIMULATED)
    else:
        host_dev = real_host
        held_map[HOST] = HeldMemory(max(real_host.total - real_host.free, 0), held.FROM_HOST)
    gpus = spec.devices()
    probes.insert(
        0,
        Probe(
            "simulated",
            True,
            f"{source}: "
            + (", ".join(f"{d.name} {format_size(d.free)} free of {format_size(d.total)}" for d in gpus) or "no GPU"),
        ),
    )
    for d in gpus:
        held_map[d.name] = HeldMemory(d.total - d.free, held.SIMULATED)
    return DeviceReport(gpus, host_dev, probes, held=held_map, simulated=True)


def _parse(text: str, source: str) -> SimulatedSpec:
    try:
        return parse_devices(text)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None


def probe_devices(
    vram: str | None = None, ram: str | None = None, cpu_only: bool = False, gpu: Sequence[str] = ()
) -> DeviceReport:
    """Probe this machine, or believe in simulated devices (--vram / VRAMCHAT_DEVICES) or cards (--gpu).

    Raises ValueError (with a readable reason) only for a malformed --vram, --ram, --gpu or VRAMCHAT_DEVICES.
    """
    if gpu:
        return _what_if_report(gpu, ram, cpu_only)
    env = os.environ.get(ENV_VAR, "").strip()
    if vram is not None or env:
        source = "--vram" if vram is not None else ENV_VAR
        spec = _parse(vram if vram is not None else env, source)
        if ram is not None:
            spec.ram = _parse(f"ram={ram}", "--ram").ram
        report = _simulated_report(spec, source)
        if cpu_only:
            report.gpus = []
        return report

    probes: list[Probe] = []
    host_probes: list[Probe] = []  # listed last, but read first: the Metal probe needs it
    host_dev, mem = _probe_host(host_probes)
    llama_devices = _probe_llama(probes)
    nvidia = _probe_nvml(probes)
    amd = _probe_rocm(probes)
    _probe_metal(probes, llama_devices, mem)
    probes += host_probes

    held_map: dict[str, HeldMemory] = {HOST: HeldMemory(max(host_dev.total - host_dev.free, 0), held.FROM_HOST)}
    if ram is not None:
        spec = _parse(f"ram={ram}", "--ram")
        assert spec.ram is not None
        host_dev = Host(spec.ram[0], spec.ram[0] - spec.ram[1], host_dev.cpu_features, 0, simulated=True)
        held_map[HOST] = HeldMemory(spec.ram[1], held.SIMULATED)

    warnings: list[str] = []
    apple_silicon = bool(mem and mem.unified)
    llama_gpus = [d for d in llama_devices or [] if d.is_gpu]
    gpus = [_planner_device(d, apple_silicon, warnings) for d in llama_gpus]
    sysfs = _probe_amd_sysfs(probes, llama_gpus)
    gpus, notes = free_memory.reconcile(gpus, {d.name: d.device_id for d in llama_gpus}, nvidia, sysfs, host_dev)
    gpus = learned_overhead.apply(gpus)
    gpus = with_bandwidth(gpus, llama_gpus, nvidia)
    held_map.update(held.held_on_gpus(llama_gpus, nvidia, amd))
    mismatches = advice.find_mismatches(
        None if llama_devices is None else [d.backend for d in llama_gpus],
        [g.name for g in nvidia],
        [g.name for g in amd],
        apple_silicon,
    )
    warnings = [m.message for m in mismatches] + warnings
    remote = [] if cpu_only else _probe_rpc(probes, warnings)
    held_map.update({d.name: HeldMemory(d.total - d.free, held.FROM_DEVICE) for d in remote})
    if cpu_only:
        gpus = []
    # llama.cpp lists the RPC servers' devices first ("to minimize network transfers")
    return DeviceReport(remote + gpus, host_dev, probes, warnings, held_map, mismatches, notes=notes)


def mismatch_notice(report: DeviceReport) -> str | None:
    """For the model picker: one line per GPU llama.cpp cannot use, with the command that fixes it."""
    if not report.mismatches:
        return None
    return "\n".join(f"{m.short}. Rebuild it: {m.command}" for m in report.mismatches)
