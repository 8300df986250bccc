"""What a Vulkan device's speed figure is based on: a mat-vec timed on the device, kept per machine.

ggml-vulkan reports no memory clock and NVML knows only NVIDIA cards, so a Vulkan device (an AMD or
Intel card, or Mesa's lavapipe, which runs the shaders on the CPU) has no bandwidth from any table.
The figure planner.speed needs is measured instead: app/speed/device_probe.py times one F16 mat-vec on
the device in a child process. The answer (or the reason there is none) is kept in the speed folder,
keyed by the device (name, description) and the machine (its CPU, RAM and llama.cpp's libraries), so it
is measured once per machine. A probe taken while other programs used more than app/speed/trust.py's
BUSY_LOAD of the CPUs is not kept (on lavapipe it read 0.22 GB/s so, 1.43 quiet): the figure reads
"measuring…" and the next plan, RETRY_SECONDS on, times it again.
Every figure names its basis: "measured on Vulkan0 ...", or why it is unknown.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from app.caches.files import write_atomically
from app.speed.machine import FOLDER, NOT_YET, RETRY_SECONDS, machine_key, probe_child, speed_folder
from app.speed.trust import BUSY_LOAD
from planner.hardware import Device
from planner.speed import GpuSpeed

DEVICES_FILE = "devices.json"
PROBE_FORMAT = 2  # bump when the device probe measures differently
PROBE_TIMEOUT = 120  # lavapipe builds the shader's pipeline on the CPU first
_lock = threading.Lock()
_memo: dict[str, tuple[GpuSpeed, float | None]] = {}  # the answer, and until when (None: for good)


def device_key(d: Device) -> str:
    return json.dumps(
        {"format": PROBE_FORMAT, "name": d.name, "description": d.description, "machine": machine_key()},
        sort_keys=True,
    )


def run_device_probe(d: Device) -> dict[str, Any]:
    """The device probe's answer ({"bandwidth", "bytes", "seconds"} or {"error"}), in a child process."""
    import subprocess  # here: a plan without a Vulkan device starts no probe

    from app.speed.device_probe import matrix_bytes

    try:
        proc = probe_child("app.speed.device_probe", [d.name, str(matrix_bytes(d.max_tensor_bytes))], PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"the device probe did not finish: {exc}"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        detail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return {"error": f"the device probe failed: {detail}"}
    try:
        data = json.loads(lines[-1])
    except ValueError as exc:
        return {"error": f"the device probe's answer is unreadable: {exc}"}
    return data if isinstance(data, dict) else {"error": "the device probe's answer is unreadable"}


def _speed(d: Device, data: dict[str, Any]) -> GpuSpeed:
    bandwidth = data.get("bandwidth")
    if isinstance(bandwidth, (int, float)) and bandwidth > 0:
        what = f"{d.name} ({d.description})" if d.description else d.name
        mib = int(data.get("bytes", 0)) >> 20
        rates = {
            str(k): float(v) for k, v in (data.get("type_rates") or {}).items() if isinstance(v, (int, float)) and v > 0
        }
        op = data.get("op_seconds")
        start = data.get("graph_seconds")
        per_type = ", ".join(f"{k} {v / 1e9:.2f}" for k, v in rates.items() if k != "f16")
        source = (
            f"measured on {what}: one {mib} MiB F16 mat-vec through ggml-vulkan, {bandwidth / 1e9:.2f} GB/s"
            + (f" ({per_type} GB/s)" if per_type else "")
            + (f", {op * 1e6:.0f} µs an operation" if isinstance(op, (int, float)) else "")
            + " (no memory clock is reported for Vulkan devices)"
        )
        return GpuSpeed(
            d.name,
            float(bandwidth),
            source,
            measured=True,
            type_rates=rates,
            op_seconds=float(op) if isinstance(op, (int, float)) else None,
            graph_seconds=float(start) if isinstance(start, (int, float)) else None,
        )
    why = data.get("error") or "no figure"
    return GpuSpeed(d.name, None, f"no memory bandwidth reported for {d.name} (vulkan), and timing one failed: {why}")


def vulkan_speed(d: Device, measure: bool = True) -> GpuSpeed:
    """The device's speed figure with its basis; measured on the device the first time it is asked."""
    key = device_key(d)
    path = speed_folder() / DEVICES_FILE
    memo = f"{path}\n{key}"
    with _lock:
        known = _memo.get(memo)
        if known is not None and (known[1] is None or time.monotonic() < known[1]):
            return known[0]
        kept = _read(path)
        data = kept.get(key)
        if not isinstance(data, dict):
            if not measure:
                return GpuSpeed(d.name, None, f"{d.name}'s speed has not been measured on the device yet")
            data = run_device_probe(d)
            busy = _busy(data)
            if busy:  # not kept: measured again on a later plan
                why = f"{d.name}: {NOT_YET}: {busy}"
                answer = GpuSpeed(d.name, None, why, pending=why)
                _memo[memo] = (answer, time.monotonic() + RETRY_SECONDS)
                return answer
            kept[key] = data
            write_atomically(path, json.dumps(kept).encode(), keep=16)
        answer = _speed(d, data)
        _memo[memo] = (answer, None)
        return answer


def _busy(data: dict[str, Any]) -> str | None:
    """Why a device probe's figure cannot be trusted (other programs held the CPUs), or None."""
    load = data.get("load")
    if data.get("bandwidth") and isinstance(load, (int, float)) and load > BUSY_LOAD:
        return f"the machine was busy (other programs used {load:.0%} of the CPUs)"
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def forget() -> None:
    """Drop what this process remembers (tests)."""
    with _lock:
        _memo.clear()


__all__ = ["DEVICES_FILE", "FOLDER", "forget", "run_device_probe", "speed_folder", "vulkan_speed"]
