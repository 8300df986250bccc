"""This machine's speed figures (planner.speed.CpuSpeed), measured once and kept per machine.

The probe (app/speed/probe.py) runs in a child process of its own: its ggml
calls run native code with hand-declared signatures, and a GPU build must not load its
runtime into the app's process (see app/devices/ggml.py). Its answer is kept in the cache
folder, keyed by what decides it: the CPU (name, flags, core count), total RAM, the thread
count the engine uses, and llama.cpp's libraries (names, sizes, times); a new llama.cpp,
another CPU or a changed probe measures again. A probe that fails is remembered with its
reason under the same key, so a machine without llama.cpp is not asked again each plan.

The probe is never on a plan's path: a plan reads the figures kept, and where there are none it says
"measuring…" at once (why: `NOT_YET`) and starts the probe in the background (app/speed/background.py: a
process of its own, at the lowest priority, one at a time per home), which measures until it has figures
app/speed/trust.py trusts; the next plan quotes them. A probe taken while other programs held the cores is
dropped and taken again `RETRY_SECONDS` later. Figures kept by an earlier version that fail the same checks
are dropped too.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.caches.files import write_atomically
from app.paths import cache_dir
from planner.speed import CpuSpeed

if TYPE_CHECKING:
    import subprocess  # imported where a probe starts: a plan that quotes the kept figures starts none

FOLDER = "speed"
MACHINE_FILE = "machine.json"
PROBE_FORMAT = 13  # bump when the probe measures differently
PROBE_TIMEOUT = 60
NOT_YET = "speed not yet measured"  # the start of the words while no trusted probe exists
RETRY_SECONDS = 30.0  # after a probe that was not trusted, the next one waits at least this long
PROBE_MODULE = "app.speed.probe"  # what a probe runs, in a child of its own
LOCK_FILE = "probe.lock"  # held by the one background probe of a home while it measures
MEASURING = "being measured in the background at low priority (the next plan quotes it)"
_lock = threading.Lock()
# what this process knows: (answer, until when; None: for good)
_memo: dict[str, tuple[tuple[CpuSpeed | None, str], float | None]] = {}


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


def cpu_identity() -> list[str]:
    """The key's CPU lines alone (a picker row's speed asks for them: machine_key also reads RAM and files)."""
    return list(_cpu_lines())


@functools.cache
def _cpu_lines() -> tuple[str, ...]:
    """The CPU's name and features as /proc/cpuinfo gives them, read once per process (they do not change)."""
    return tuple(_read_cpu_identity())


def _read_cpu_identity() -> list[str]:
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
        "cpu": cpu_identity(),
        "cores": os.cpu_count() or 1,
        "threads": max(1, os.cpu_count() or 1),  # what the engine uses (app/engine/engine.py)
        "ram": ram,
        "llama_cpp": _library_files(),
    }


def probe_child(module: str, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a probe module in a child process of its own (llama.cpp in-process there), its output read as
    text; raises OSError or subprocess.TimeoutExpired."""
    import subprocess

    from app.children import child_env
    from app.native import IN_PROCESS_ENV

    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env() | {IN_PROCESS_ENV: "1"},
        stdin=subprocess.DEVNULL,
    )


def run_probe(full: bool = False, module: str | None = None) -> dict[str, Any]:
    """The probe's figures, measured in a child process (`full`: every figure, even on a busy machine,
    where the probe otherwise stops early); raises RuntimeError with the reason."""
    import subprocess

    try:
        proc = probe_child(module or PROBE_MODULE, ["--full"] if full else [], PROBE_TIMEOUT)
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
    return f"measured on this machine (a {seconds:.1f} s probe of ggml's kernels, {data.get('threads')} threads)"


def waiting(why: str) -> bool:
    """Whether `cpu_speed`'s reason says the figures are still to be measured (not that they cannot be)."""
    return why.startswith(NOT_YET)


def cpu_speed(measure: bool = True) -> tuple[CpuSpeed | None, str]:
    """This CPU's figures and a line saying where they come from; (None, why) when there are none:
    `waiting(why)` while no trusted probe exists yet. It never waits for a probe: without figures kept it
    starts one in the background (`measure`; measure=False only reads what was kept)."""
    key = machine_key()
    path = speed_folder() / MACHINE_FILE
    stamp = json.dumps(key, sort_keys=True)
    memo = f"{path}\n{stamp}"
    with _lock:
        known = _memo.get(memo)
        if known is not None and (known[1] is None or not measure or time.monotonic() < known[1]):
            return known[0]
        kept = _kept(path, json.loads(stamp))
        if kept is not None:
            answer = _answer(kept)
        elif not measure:
            return None, f"{NOT_YET}: the probe has not run"
        else:
            answer = start_background_probe() or (None, f"{NOT_YET}: {MEASURING}")
        retry_at = time.monotonic() + RETRY_SECONDS if answer[0] is None and waiting(answer[1]) else None
        _memo[memo] = answer, retry_at
        return answer


def _kept(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """What was kept for this machine, where it still holds: figures a probe would trust, or an error."""
    from app.speed.trust import distrust

    kept = _read(path)
    if kept is None or kept.get("key") != key:
        return None
    figures = kept.get("figures")
    if isinstance(figures, dict) and distrust(figures) is not None:
        with contextlib.suppress(OSError):  # a disturbed probe kept before: dropped, measured again
            path.unlink()
        return None
    return kept


PROBE_SWITCH = "VRAMCHAT_SPEED_PROBE"  # "off": never time this CPU (speeds then read unknown, not "measuring")


def start_background_probe() -> tuple[CpuSpeed | None, str] | None:
    """The probe started in the background for this home, unless one is running (app/speed/background.py);
    None: nothing to say yet but "measuring…". (A test runs it in place and returns its answer.)"""
    if os.environ.get(PROBE_SWITCH, "").strip().lower() == "off":
        return None, f"this CPU's speed is not measured ({PROBE_SWITCH}=off)"
    folder = speed_folder()
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
    if probe_running(folder):
        return None
    import subprocess

    from app.children import child_env

    with contextlib.suppress(OSError):  # detached: the command that asked ends at once, a closed terminal ends it not
        subprocess.Popen(
            [sys.executable, "-m", "app.speed.background", PROBE_MODULE],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env=child_env(),
        )
    return None


def probe_running(folder: Path) -> bool:
    """Whether a background probe holds this home's lock now (app/speed/background.py)."""
    import fcntl

    with contextlib.suppress(OSError), open(folder / LOCK_FILE, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def measure_and_keep(module: str | None = None) -> tuple[CpuSpeed | None, str]:
    """Run the probe now (the background probe's one try): keep what it measured when trusted (or why it
    failed, for good); else say it is still to come."""
    key = machine_key()
    return _measure(speed_folder() / MACHINE_FILE, key, module)


def _measure(path: Path, key: dict[str, Any], module: str | None = None) -> tuple[CpuSpeed | None, str]:
    """Run the probe: keep what it measured when trusted (or why it failed); else say it is still to come."""
    from app.speed.trust import distrust

    try:
        figures = run_probe(module=module) if module else run_probe()
    except RuntimeError as exc:
        kept: dict[str, Any] = {"key": key, "error": str(exc)}
    else:
        why = distrust(figures)
        if why is not None:
            return None, f"{NOT_YET}: {why}"
        kept = {"key": key, "figures": figures}
    write_atomically(path, json.dumps(kept).encode(), keep=16)
    return _answer(kept)


def _answer(kept: dict[str, Any]) -> tuple[CpuSpeed | None, str]:
    if "figures" in kept:
        try:
            data = dict(kept["figures"])
            data["source"] = _source(data)
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
