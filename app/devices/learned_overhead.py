"""What each GPU really holds beyond llama.cpp's buffers, learned from this machine's own loads and replies.

The planner derives a GPU backend's own memory from the device (planner.gpu_overhead); the truth is
what the device holds once a model runs. After each load and after the first reply of a load,
vramchat reads it and keeps it here, per device model, driver and llama.cpp build (two identical
cards share one entry), in vramchat's cache. The next plan for that device uses it and says so
("learned on this GPU, 3 loads"). Figures only grow: each is kept at its peak, and a load that
failed for memory, or a drift alarm, raises them.

How the device is read, whichever the platform has:
- NVML's figure for the engine process (Linux with an NVIDIA driver): exact, others do not count;
- else llama.cpp's own free memory before and after (ROCm, Vulkan, Metal, Windows where WDDM hides
  per-process figures, WSL2 with no process list): free compared with free from the same source,
  so other programs that took or gave memory meanwhile count too (named in the entry's source).
Buffers are what llama.cpp allocated (its log), in whole 2 MiB pages on CUDA.

Simulated and what-if devices (--vram, --gpu, VRAMCHAT_DEVICES) and RPC servers are never learned.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from planner import LLAMA_CPP_BUILD
from planner.gpu_overhead import PAGE, on_pages
from planner.hardware import Device, LearnedOverhead, format_size

if TYPE_CHECKING:
    from app.devices.process import ProcessMemory
    from planner.memory import MemoryPlan

FOLDER = "overhead"
FILE = "learned.json"
FORMAT = 1

LOAD, REPLY, FAILURE, DRIFT = "load", "reply", "failure", "drift"
FROM_NVML = "NVML's figure for the engine process"
FROM_FREE = "llama.cpp's free memory before and after (other programs' changes count)"


def store_path() -> Path:
    from app.paths import cache_dir

    return cache_dir() / FOLDER / FILE


def device_key(d: Device) -> str:
    """One entry per device model, driver and build (the name llama.cpp gives it can change order)."""
    return "|".join((d.backend, d.card or d.description or d.name, d.driver, LLAMA_CPP_BUILD))


def learnable(d: Device) -> bool:
    return d.is_gpu and not d.simulated and d.backend != "rpc"


@dataclass
class Entry:
    """What one device model took beyond its buffers, at its peaks."""

    context: int = 0
    runtime_flash_attn: int | None = None
    runtime_cublas: int | None = None
    loads: int = 0
    replies: int = 0
    raised_by: str = ""
    source: str = ""
    description: str = ""
    backend: str = ""
    driver: str = ""
    build: str = LLAMA_CPP_BUILD
    updated: float = 0.0

    def learned(self) -> LearnedOverhead:
        return LearnedOverhead(
            self.context, self.runtime_flash_attn, self.runtime_cublas, self.loads, self.replies, self.raised_by
        )


@dataclass(frozen=True)
class Reading:
    """One look at a device: the bytes it uses beyond the buffers (after a load: the context and what the load
    took; after a reply, a failure or a drift: context and runtime together)."""

    device: Device
    stage: str  # LOAD, REPLY, FAILURE, DRIFT
    beyond_buffers: int
    uses_cublas: bool
    source: str


class LearnedStore:
    """The entries, in one JSON file written whole (a file that cannot be read is started afresh)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or store_path()

    def entries(self) -> dict[str, Entry]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                return {}
            known = set(Entry.__dataclass_fields__)
            return {k: Entry(**{f: v for f, v in e.items() if f in known}) for k, e in data["devices"].items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return {}

    def _save(self, entries: Mapping[str, Entry]) -> None:
        from app.caches.files import write_atomically

        text = json.dumps({"format": FORMAT, "devices": {k: asdict(e) for k, e in entries.items()}}, indent=1)
        write_atomically(self.path, text.encode(), keep=1)  # the folder holds this file alone

    def get(self, d: Device) -> LearnedOverhead | None:
        entry = self.entries().get(device_key(d))
        return entry.learned() if entry is not None and entry.loads else None

    def record(self, readings: Iterable[Reading]) -> list[Entry]:
        """Fold readings into the entries (peaks kept) and write them; the entries changed."""
        entries = self.entries()
        changed = []
        for r in readings:
            if not learnable(r.device) or r.beyond_buffers < 0:
                continue
            key = device_key(r.device)
            entry = entries.get(key) or Entry(
                description=r.device.card or r.device.description, backend=r.device.backend, driver=r.device.driver
            )
            _fold(entry, r)
            entry.updated = time.time()
            entries[key] = entry
            changed.append(entry)
        if changed:
            self._save(entries)
        return changed

    def forget(self) -> list[Entry]:
        """Clear every entry; the ones there were."""
        gone = list(self.entries().values())
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        return gone


def _fold(entry: Entry, r: Reading) -> None:
    entry.source = r.source
    if r.stage == LOAD:
        entry.loads += 1
        entry.context = max(entry.context, r.beyond_buffers)
        return
    if r.stage == FAILURE:
        # the load needed more than the free memory: the context was at least what was left beside the buffers
        entry.loads = max(entry.loads, 1)
        if r.beyond_buffers > entry.context:
            entry.context = r.beyond_buffers
            entry.raised_by = "a failed load"
        return
    runtime = max(r.beyond_buffers - entry.context, 0)
    attr = "runtime_cublas" if r.uses_cublas else "runtime_flash_attn"
    before = getattr(entry, attr)
    if r.stage == REPLY:
        entry.replies += 1
    elif before is None or runtime > before:
        entry.raised_by = "a drift alarm"
    entry.loads = max(entry.loads, 1)
    setattr(entry, attr, max(before or 0, runtime))


def apply(devices: list[Device], store: LearnedStore | None = None) -> list[Device]:
    """The devices with what was learned on them attached (the planner then uses it)."""
    if not any(learnable(d) for d in devices):
        return devices
    entries = (store or LearnedStore()).entries()
    out = []
    for d in devices:
        entry = entries.get(device_key(d)) if learnable(d) else None
        out.append(replace(d, learned=entry.learned()) if entry is not None and entry.loads else d)
    return out


def describe(learned: LearnedOverhead) -> str:
    """One line for --devices."""
    runtimes = [
        f"{what} {format_size(size)}"
        for what, size in (
            ("with flash attention", learned.runtime_flash_attn),
            ("with cuBLAS", learned.runtime_cublas),
        )
        if size is not None
    ]
    loads = f"{learned.loads} load{'s' if learned.loads != 1 else ''}"
    replies = f", {learned.replies} repl{'ies' if learned.replies != 1 else 'y'}" if learned.replies else ""
    raised = f", raised by {learned.raised_by}" if learned.raised_by else ""
    runtime = f"; runtime {', '.join(runtimes)}" if runtimes else "; no reply seen yet"
    return f"learned on this GPU ({loads}{replies}{raised}): context {format_size(learned.context)}{runtime}"


# -- the readings, from what a load and a reply leave behind -------------------------------------------


def buffers_by_device(tables: Iterable[Mapping[str, int]], gpu_names: list[str], paged: set[str]) -> dict[str, int]:
    """llama.cpp's buffers summed per GPU (the pinned host buffers are not on it), in whole pages where the
    driver holds them so (CUDA)."""
    from app.devices.buffer_names import device_of

    out: dict[str, int] = {}
    for table in tables:
        for name, size in table.items():
            device = device_of(name, gpu_names)
            if device in gpu_names:
                out[device] = out.get(device, 0) + (on_pages(size) if device in paged else size)
    return out


@dataclass(frozen=True)
class Drift:
    """What a drift alarm's reading did: raised the learned figure, or showed other programs took the memory."""

    raised: bool
    others: bool


@dataclass
class LoadLearning:
    """One loaded model's devices, read after the load and after the first reply (and on a drift)."""

    devices: list[Device]  # as planned (free memory before the load)
    buffers: dict[str, int]  # llama.cpp's buffers per device, as allocated
    uses_cublas: bool
    pid: int | None = None
    store: LearnedStore = field(default_factory=LearnedStore)
    replied: bool = False

    def _beyond_buffers(
        self, d: Device, process: Mapping[str, int], free_now: Mapping[str, int]
    ) -> tuple[int, str] | None:
        if d.name in process:
            return process[d.name] - self.buffers.get(d.name, 0), FROM_NVML
        if d.name in free_now:
            return d.free - free_now[d.name] - self.buffers.get(d.name, 0), FROM_FREE
        return None

    def read(self, stage: str, process: Mapping[str, int], free_now: Mapping[str, int]) -> list[Reading]:
        readings = []
        for d in self.devices:
            if not learnable(d) or d.name not in self.buffers:
                continue
            beyond = self._beyond_buffers(d, process, free_now)
            if beyond is not None:
                readings.append(Reading(d, stage, beyond[0], self.uses_cublas, beyond[1]))
        return readings

    def after_load(self, process: Mapping[str, int], free_now: Mapping[str, int]) -> list[Entry]:
        return self.store.record(self.read(LOAD, process, free_now))

    def after_reply(self, process: Mapping[str, int], free_now: Mapping[str, int]) -> list[Entry]:
        """The first reply of the load only: the runtime has then done its first growth."""
        if self.replied:
            return []
        self.replied = True
        return self.store.record(self.read(REPLY, process, free_now))

    def drifted(self, name: str, used_now: int, total: int) -> Drift:
        """The device holds more than planned: record what this process holds beyond its buffers. Where NVML
        has the engine's own figure, other programs' memory does not count (and is named as the cause)."""
        d = next((d for d in self.devices if d.name == name), None)
        if d is None:
            return Drift(False, False)
        process, _free = read_now(self.pid)
        if name in process:
            readings = self.read(DRIFT, {name: process[name]}, {})
        else:
            readings = self.read(DRIFT, {}, {name: max(total - used_now, 0)})
        if not readings:
            return Drift(False, False)
        key = device_key(d)
        before = self.store.entries().get(key)
        attr = "runtime_cublas" if self.uses_cublas else "runtime_flash_attn"
        was = (getattr(before, attr) or 0, before.context) if before is not None else (0, 0)
        after = {device_key(r.device): r for r in readings}
        self.store.record(readings)
        now = self.store.entries().get(key)
        rose = now is not None and (getattr(now, attr) or 0, now.context) > was
        own = after[key].beyond_buffers if key in after else 0
        others = name in process and not rose and own <= sum(was)
        return Drift(rose, others)


def failure_readings(devices: list[Device], planned_buffers: Mapping[str, int], failed: Iterable[str]) -> list[Reading]:
    """A load that ran out of memory on `failed`: the backend took at least what the free memory left
    beside the planned buffers, one page more."""
    by_name = {d.name: d for d in devices}
    out = []
    for name in failed:
        d = by_name.get(name)
        if d is not None and learnable(d) and name in planned_buffers:
            out.append(
                Reading(d, FAILURE, d.free - planned_buffers[name] + PAGE, False, "a load that ran out of memory")
            )
    return out


def summary(entries: Iterable[Entry]) -> str:
    return "; ".join(f"{e.description} ({e.backend}, driver {e.driver or '?'})" for e in entries)


def read_now(pid: int | None) -> tuple[dict[str, int], dict[str, int]]:
    """(what NVML says process `pid` holds per GPU, the free memory per GPU as the probe reads it)."""
    from app.devices import ggml, nvml, pci

    process: dict[str, int] = {}
    if pid is not None:
        with contextlib.suppress(Exception):
            gpus = [g for g in nvml.list_gpus() if not g.error]
            for name, g in pci.match(ggml.last_devices(), gpus, "cuda").items():
                size = g.processes.get(pid)
                if size is not None:
                    process[name] = size
    free: dict[str, int] = {}
    with contextlib.suppress(Exception):
        free = {name: f for name, (f, _total) in ggml.gpu_memory().items()}
    return process, free


class BufferTables(Protocol):
    """What llama.cpp's log said it allocated (app.engine.llama_log.Measurements)."""

    def tables(self) -> list[tuple[str, dict[str, int]]]:
        """(kind, bytes per buffer name) for each kind of buffer."""
        ...


class LoadReadings(Protocol):
    """What a load's report offers the learning (app.engine.LoadReport): the devices stay below the
    engine, which fills it."""

    process: ProcessMemory | None  # the engine's own reading of the devices, right after the load

    @property
    def measurements(self) -> BufferTables:
        """The buffers llama.cpp's log said it allocated."""
        ...


class LoadedLike(Protocol):
    """What a loaded model offers the learning (app.session.LoadedModel)."""

    @property
    def now(self) -> MemoryPlan: ...
    @property
    def report(self) -> LoadReadings: ...


def learn_after_load(model: LoadedLike, devices: list[Device], pid: int | None) -> LoadLearning | None:
    """Read the devices just after a load and record what they hold beyond the buffers; the object that
    reads them again after the first reply (None when no device can be learned)."""
    gpus = [d for d in devices if learnable(d)]
    if not gpus:
        return None
    plan, report = model.now, model.report
    uses_cublas = not plan.config.flash_attn or plan.model.n_expert > 0
    learning = LoadLearning(gpus, buffers_now(model, gpus), uses_cublas, pid)
    process, free = read_now(pid)
    after = report.process
    if after is not None:  # the engine's own reading, right after the load (Metal has no other)
        process = {**after.gpu, **process}
        free = {**after.device_free, **free}
    learning.after_load(process, free)
    return learning


def buffers_now(model: LoadedLike, gpus: list[Device]) -> dict[str, int]:
    """llama.cpp's buffers per GPU as allocated now (the context may have grown since the load); the
    plan's for a device the log said nothing of."""
    plan, report = model.now, model.report
    names = [d.name for d in gpus]
    paged = {d.name for d in gpus if d.backend == "cuda"}
    buffers = buffers_by_device([table for _kind, table in report.measurements.tables()], names, paged)
    for name in names:
        if name not in buffers and any(b.device == name for b in plan.buffers):
            buffers[name] = sum(
                on_pages(b.bytes) if name in paged else b.bytes for b in plan.buffers if b.device == name
            )
    return buffers


def after_reply(learning: LoadLearning | None, model: LoadedLike | None) -> list[Entry]:
    """After a reply: the first of the load is read (its buffers as allocated now)."""
    if learning is None or learning.replied or model is None:
        return []
    learning.buffers = buffers_now(model, learning.devices)
    return learning.after_reply(*read_now(learning.pid))


def after_failed_load(plan: MemoryPlan, devices: list[Device], failed: Iterable[str]) -> list[Entry]:
    """A load that ran out of memory on `failed` raises what those GPUs are known to take."""
    paged = {d.name for d in devices if d.backend == "cuda"}
    planned: dict[str, int] = {}
    for b in plan.buffers:
        planned[b.device] = planned.get(b.device, 0) + (on_pages(b.bytes) if b.device in paged else b.bytes)
    readings = failure_readings(devices, planned, failed)
    return LearnedStore().record(readings) if readings else []
