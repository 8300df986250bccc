"""This machine's speed figures (planner.speed.CpuSpeed), measured once and kept per machine.

The probe (app/speed/probe.py) runs in a child process of its own: its ggml
calls run native code with hand-declared signatures, and a GPU build must not load its
runtime into the app's process (see app/devices/ggml.py). Its answer is kept in the cache
folder, keyed by what decides it: the CPU (name, flags, core count), total RAM, the thread
count the engine uses, and llama.cpp's libraries (names, sizes, times); a new llama.cpp,
another CPU or a changed probe measures again. A probe that fails is remembered with its
reason under the same key, so a machine without llama.cpp is not asked again each plan.
A probe taken while other programs kept the CPUs busy is repeated on a later plan, up to
three in all, and each figure kept at the best any of them measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from app.caches.files import write_atomically
from app.paths import cache_dir
from planner.speed import CpuSpeed

FOLDER = "speed"
MACHINE_FILE = "machine.json"
PROBE_FORMAT = 2  # bump when the probe measures differently
PROBE_TIMEOUT = 60
# a probe that saw other processes use more than this share of the CPUs is run again on later
# plans (at most MAX_PROBES in all), each figure kept at its best: load only ever slows a run
BUSY_LOAD = 0.2
MAX_PROBES = 3
_lock = threading.Lock()
_memo: dict[str, tuple[CpuSpeed | None, str]] = {}


def speed_folder() -> Path:
    return cache_dir() / FOLDER


def _library_files() -> list[tuple[str, int, int]]:
    from app.devices.ggml import GGMLUnavailable, library_dir

    try:
        folder = library_dir()
        names = sorted(os.listdir(folder))
    except (GGMLUnavailable, OSError):
        return []
    out = []
    for name in names:
        with contextlib.suppress(OSError):
            st = os.stat(os.path.join(folder, name))
            out.append((name, st.st_size, st.st_mtime_ns))
    return out


def _cpu_identity() -> list[str]:
    fields = ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part")
    out: list[str] = []
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                break
            if line.split(":", 1)[0].strip() in fields:
                out.append(line.strip())
    if not out:
        import platform

        out = [platform.processor() or platform.machine()]
    return out


def machine_key() -> dict[str, Any]:
    """What the figures depend on: another CPU, RAM size, thread count or llama.cpp measures again."""
    from app.devices.host import read_host

    try:
        ram = read_host().total
    except Exception:  # psutil missing: the key is only less specific
        ram = 0
    return {
        "format": PROBE_FORMAT,
        "cpu": _cpu_identity(),
        "cores": os.cpu_count() or 1,
        "threads": max(1, os.cpu_count() or 1),  # what the engine uses (app/engine/engine.py)
        "ram": ram,
        "llama_cpp": _library_files(),
    }


def run_probe() -> dict[str, Any]:
    """The probe's figures, measured in a child process; raises RuntimeError with the reason."""
    from app.children import child_env
    from app.native import IN_PROCESS_ENV

    try:
        proc = subprocess.run(
            [sys.executable, "-m", "app.speed.probe"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            env=child_env() | {IN_PROCESS_ENV: "1"},
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"the speed probe did not finish: {exc}") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        detail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise RuntimeError(f"the speed probe failed: {detail}")
    try:
        data = json.loads(lines[-1])
        if not isinstance(data, dict):
            raise ValueError("not an object")
        return data
    except ValueError as exc:
        raise RuntimeError(f"the speed probe's answer is unreadable: {exc}") from None


def _source(data: dict[str, Any]) -> str:
    seconds = float(data.get("probe_seconds", 0.0))
    probes = int(data.get("probes", 1))
    runs = f"best of {probes} probes" if probes > 1 else f"a {seconds:.1f} s probe"
    source = f"measured on this machine ({runs} of ggml's kernels, {data.get('threads')} threads)"
    load = data.get("load")
    if isinstance(load, (int, float)) and load > BUSY_LOAD:  # the figures may be far too slow: say so
        again = "measured again at a later plan" if probes < MAX_PROBES else "they may be too slow"
        source += f"; other programs kept the CPUs {load:.0%} busy meanwhile: {again}"
    return source


def cpu_speed(measure: bool = True) -> tuple[CpuSpeed | None, str]:
    """This CPU's figures and a line saying where they come from; (None, why) when unknown.

    measure=False only reads what was kept (for callers that must not wait half a second)."""
    key = machine_key()
    path = speed_folder() / MACHINE_FILE
    stamp = json.dumps(key, sort_keys=True)
    memo = f"{path}\n{stamp}"
    with _lock:
        if memo in _memo:
            return _memo[memo]
        kept = _read(path)
        if kept is not None and kept.get("key") == json.loads(stamp) and not (measure and _busy(kept)):
            answer = _answer(kept)
        elif not measure:
            return None, "this CPU's speed has not been measured yet"
        else:
            try:
                figures = run_probe()
                if kept is not None and kept.get("key") == json.loads(stamp) and "figures" in kept:
                    figures = merge(kept["figures"], figures)
                kept = {"key": key, "figures": figures}
            except RuntimeError as exc:
                if kept is None or kept.get("key") != json.loads(stamp) or "figures" not in kept:
                    kept = {"key": key, "error": str(exc)}
            write_atomically(path, json.dumps(kept).encode(), keep=16)
            answer = _answer(kept)
        _memo[memo] = answer
        return answer


def _busy(kept: dict[str, Any]) -> bool:
    """Whether the kept figures came from probes under load, and another may still be taken."""
    figures = kept.get("figures")
    if not isinstance(figures, dict):
        return False
    load = figures.get("load")
    return isinstance(load, (int, float)) and load > BUSY_LOAD and int(figures.get("probes", 1)) < MAX_PROBES


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Two probes' figures, each at its best (rates at their highest, times at their lowest)."""

    def best(a: Any, b: Any, high: bool) -> Any:
        if isinstance(a, dict) and isinstance(b, dict):
            return {k: best(a.get(k), b.get(k), high) for k in set(a) | set(b)}
        values = [x for x in (a, b) if isinstance(x, (int, float))]
        if not values:
            return None
        return max(values) if high else min(values)

    out = dict(new)
    for name in ("decode_rates", "prefill_rates", "large_factor", "read_bandwidth"):
        out[name] = best(old.get(name), new.get(name), high=True)
    for name in ("graph_seconds", "op_seconds", "attention_seconds", "load"):
        out[name] = best(old.get(name), new.get(name), high=False)
    out["probes"] = int(old.get("probes", 1)) + 1
    out["probe_seconds"] = float(new.get("probe_seconds", 0.0))
    return out


def _answer(kept: dict[str, Any]) -> tuple[CpuSpeed | None, str]:
    if "figures" in kept:
        try:
            data = dict(kept["figures"])
            data["source"] = _source(data)
            load = data.get("load")
            data["busy"] = load if isinstance(load, (int, float)) and load > BUSY_LOAD else 0.0
            return CpuSpeed.from_json(data), data["source"]
        except (KeyError, TypeError, ValueError) as exc:
            return None, f"this CPU's speed figures are unreadable ({exc})"
    return None, str(kept.get("error") or "this CPU's speed could not be measured")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def forget() -> None:
    """Drop what this process remembers (tests, and a bench that measures again)."""
    with _lock:
        _memo.clear()
