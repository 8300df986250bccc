"""The device report in the command line's output: `--devices`, and what `--plan` adds to the plan.

The plan itself (planner.report) knows nothing of probes; what other processes
hold and which GPU llama.cpp cannot use come from here, in the table and in
the JSON alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.devices.learned_overhead import describe as describe_learned
from app.devices.probes import HOST, DeviceReport
from planner.hardware import Device, format_size


def _held_json(report: DeviceReport, name: str) -> dict[str, Any]:
    h = report.held.get(name)
    return {"held_by_others": h.bytes if h else None, "held_by_others_source": h.source if h else None}


def annotate_plan_json(data: dict[str, Any], report: DeviceReport) -> dict[str, Any]:
    """Add to `--plan --json`: per device and for the host, memory other processes hold (and how it
    is known); GPUs llama.cpp cannot use, with the command that fixes it; warnings."""
    for device in data.get("devices", []):
        device.update(_held_json(report, device["name"]))
    if "host" in data:
        data["host"].update(_held_json(report, HOST))
    data["gpu_mismatch"] = [m.to_json() for m in report.mismatches]
    data["warnings"] = list(report.warnings)
    data["device_notes"] = list(report.notes)
    data["simulated_devices"] = report.simulated
    return data


def held_lines(report: DeviceReport, gpu_names: Sequence[str]) -> list[str]:
    lines = []
    for name in [*gpu_names, HOST]:
        h = report.held.get(name)
        if h is None:
            continue
        label = "host RAM" if name == HOST else name
        count = f", {h.processes} processes" if h.processes else ""
        lines.append(f"  {label:<10}{format_size(h.bytes):>11}  ({h.source}{count})")
    return lines


def plan_notes(report: DeviceReport, gpu_names: Sequence[str], advice: Sequence[str] = ()) -> str:
    """What follows the plan's table: memory held by others, what free memory means on these devices,
    advice (the Metal wired limit), then warnings (mismatch first)."""
    parts = []
    lines = held_lines(report, gpu_names)
    if lines:
        parts.append("\n".join(["Held by other processes (the plan counts only free memory)", *lines]))
    if report.notes:
        parts.append("\n".join(["Free memory on these devices", *(f"  - {n}" for n in report.notes)]))
    parts += [f"Advice: {a}" for a in advice]
    parts += [f"Warning: {w}" for w in report.warnings]
    return "\n\n".join(parts)


def identity_line(d: Device) -> str | None:
    """What the GPU is, as the overhead is derived from it."""
    parts = []
    if d.card and d.card not in d.description:
        parts.append(d.card)
    if d.sm_count:
        unit = "SMs" if d.backend == "cuda" else "CUs" if d.backend == "rocm" else "cores"
        threads = f" x {d.threads_per_sm:,} threads" if d.threads_per_sm else ""
        parts.append(f"{d.sm_count} {unit}{threads}")
    if d.compute_capability:
        parts.append(f"compute capability {d.compute_capability}" if d.backend == "cuda" else d.compute_capability)
    if d.driver:
        parts.append(f"driver {d.driver}")
    if d.bandwidth:
        parts.append(f"{d.bandwidth / 1e9:g} GB/s ({d.bandwidth_source or 'bandwidth'})")
    return ", ".join(parts) or None


def devices_text(report: DeviceReport) -> str:
    """`vramchat --devices`: each probe's finding, then the devices plans are made for."""
    lines = ["Probes"]
    for probe in report.probes:
        status = "ok " if probe.available else "-- "
        lines.append(f"  {status}{probe.name:<14} {probe.detail}")
    lines += ["", "Devices vramchat plans for"]
    for d in report.gpus:
        others = report.held.get(d.name)
        extra = f", {format_size(others.bytes)} held by others: {others.source}" if others and others.bytes else ""
        shared = ", shares host RAM" if d.unified else ""
        if d.backend == "rpc":
            lent = "its CPU and RAM, " if d.remote_cpu else ""
            shared += f", {lent}lent by the RPC server {d.description} (over the network)"
        lines.append(
            f"  {d.name:<8} {d.backend:<7} {format_size(d.free)} free of {format_size(d.total)}{shared}{extra}"
        )
        identity = identity_line(d)
        if identity:
            lines.append(f"           {identity}")
        if d.learned is not None:
            lines.append(f"           overhead {describe_learned(d.learned)}")
    h, held = report.host, report.held.get(HOST)
    lines.append(
        f"  host     RAM     {format_size(h.free)} available of {format_size(h.total)}"
        + (f", {format_size(held.bytes)} held by others: {held.source}" if held and held.bytes else "")
        + (f"; CPU features: {', '.join(sorted(h.cpu_features))}" if h.cpu_features else "")
    )
    if report.notes:
        lines += ["", "Free memory on these devices", *(f"  - {n}" for n in report.notes)]
    for warning in report.warnings:
        lines += ["", f"Warning: {warning}"]
    return "\n".join(lines)


def device_line(report: DeviceReport) -> str:
    """The devices plans are made for, on one line (the picker's head, the end of --list)."""
    held = report.held_by_others
    parts = [
        f"{d.name}{f' {d.card}' if d.simulated and d.card else ''} {format_size(d.free)} free of {format_size(d.total)}"
        + (f" ({'a CPU lent by ' if d.remote_cpu else ''}RPC server {d.description})" if d.backend == "rpc" else "")
        + (f" ({format_size(held[d.name])} held by other processes)" if held.get(d.name) else "")
        for d in report.gpus
    ]
    if not parts:
        parts.append("no GPU llama.cpp can use")
    h = report.host
    parts.append(f"RAM {format_size(h.free)} available of {format_size(h.total)}")
    line = " · ".join(parts)
    return f"{line} · simulated devices" if report.simulated else line
