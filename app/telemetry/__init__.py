"""Live memory telemetry: a bounded time series sampled off the UI thread (about 2 Hz).

Each sample holds device memory used/total per device, the process RSS, the
compute arena and KV cache as allocated (from llama.cpp's log) and the KV cache
in use (cells the conversation occupies times bytes per cell, from the plan),
and generation speed. The UI reads `latest()` / `history()` from its own timer:
the sampler thread never touches widgets. Any reading that fails is counted in
`errors` and left out of that sample; the sampler goes on.

`for_engine()` wires one to a loaded engine, its device report and its plan;
build a new one for each load (the arena and KV sizes belong to the load).

The room, memory while a model runs: this module the sampler; drift.py a GPU holding more than planned,
memory_map.py each device's parts for the dashboard, runway.py the tokens until the context grows.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from planner.kv import KVLayout

if TYPE_CHECKING:
    from app.devices.probes import DeviceReport
    from app.engine.types import GenerationStats, LoadReport
    from planner.memory import MemoryPlan

T = TypeVar("T")


@dataclass(frozen=True)
class Sample:
    t: float  # time.monotonic()
    devices: dict[str, tuple[int, int]]  # name -> (used, total); "CPU" is host RAM
    rss: int
    compute: dict[str, int]  # compute buffers as allocated, per device
    kv_allocated: int
    kv_used: int
    kv_cells_used: int
    tokens_per_second: float
    generating: bool
    errors: tuple[str, ...] = ()  # readings that failed for this sample
    kv_maximum: int = 0  # the KV cache at the plan's maximum context (the committed one grows towards it)
    # GPUs no driver library reads live (Vulkan): their figure is what llama.cpp allocated there
    unread: frozenset[str] = frozenset()

    def free(self, device: str) -> int | None:
        if device not in self.devices:
            return None
        used, total = self.devices[device]
        return max(total - used, 0)


class EngineView(Protocol):
    """What telemetry reads from the engine (the real Engine, or a fake in UI tests)."""

    def kv_cells_used(self) -> int: ...


class LoadedEngine(EngineView, Protocol):
    """What `for_engine` reads of a loaded engine (the engine process, or a fake in UI tests)."""

    last_stats: GenerationStats
    generating: threading.Event

    @property
    def loaded(self) -> bool: ...

    @property
    def report(self) -> LoadReport | None: ...

    @property
    def pid(self) -> int | None: ...


class MemoryProbe(Protocol):
    def __call__(self) -> dict[str, tuple[int, int]]: ...


def kv_bytes_in_use(layout: KVLayout | None, cells_used: int) -> int:
    """Bytes of KV cache holding the conversation: full-attention layers grow with every cell,
    sliding-window layers stop at their window."""
    if layout is None or cells_used <= 0:
        return 0
    full = layout.bytes_per_cell(swa=False) * min(cells_used, layout.cells)
    swa = layout.bytes_per_cell(swa=True) * min(cells_used, layout.cells_swa)
    return full + swa


def _idle() -> tuple[float, bool]:
    return 0.0, False


@dataclass
class TelemetryConfig:
    interval: float = 0.5
    history: int = 1200  # samples kept: 10 minutes at 2 Hz


@dataclass
class Telemetry:
    """Samples in a background thread into a ring buffer; start() / stop() are idempotent."""

    memory: MemoryProbe  # GPUs (or every device, in tests)
    rss: Callable[[], int]
    engine: EngineView | None = None
    kv_layout: KVLayout | None = None
    kv_allocated: int = 0  # committed: what the context holds now
    compute: dict[str, int] = field(default_factory=dict)
    kv_maximum: int = 0  # at the plan's maximum context
    speed: Callable[[], tuple[float, bool]] = _idle
    config: TelemetryConfig = field(default_factory=TelemetryConfig)
    host_memory: MemoryProbe | None = None  # host RAM, read apart so that a GPU failure keeps it
    # GPUs whose memory is host RAM (Apple silicon, integrated): do not add them to the host's
    unified: frozenset[str] = frozenset()
    # told of every sample, in the sampler's thread (the drift alarm, app.telemetry.drift); one that fails is counted
    observers: list[Callable[[Sample], object]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._samples: deque[Sample] = deque(maxlen=self.config.history)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0
        self.last_error = ""

    def _read(self, what: str, fn: Callable[[], T], default: T, failed: list[str]) -> T:
        try:
            return fn()
        except Exception as exc:  # a probe failing mid-run must not kill the sampler
            self.errors += 1
            self.last_error = f"{what}: {type(exc).__name__}: {exc}"
            failed.append(self.last_error)
            return default

    def sample_once(self) -> Sample:
        failed: list[str] = []
        no_reading: dict[str, tuple[int, int]] = {}
        devices = dict(self._read("device memory", self.memory, no_reading, failed))
        if self.host_memory is not None:
            devices.update(self._read("host memory", self.host_memory, no_reading, failed))
        rss = self._read("process RSS", self.rss, 0, failed)
        engine = self.engine
        cells = self._read("KV cells", engine.kv_cells_used, 0, failed) if engine is not None else 0
        tps, generating = self._read("tokens/s", self.speed, (0.0, False), failed)
        sample = Sample(
            time.monotonic(),
            devices,
            rss,
            dict(self.compute),
            self.kv_allocated,
            kv_bytes_in_use(self.kv_layout, cells),
            cells,
            tps,
            generating,
            tuple(failed),
            max(self.kv_maximum, self.kv_allocated),
            frozenset(getattr(self.memory, "unread", ())),
        )
        with self._lock:
            self._samples.append(sample)
        for observer in list(self.observers):
            try:
                observer(sample)
            except Exception as exc:  # an observer failing must not kill the sampler either
                self.errors += 1
                self.last_error = f"observer: {type(exc).__name__}: {exc}"
        return sample

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.sample_once()
            except Exception as exc:  # pragma: no cover - sample_once guards every reading
                self.errors += 1
                self.last_error = f"sampler: {type(exc).__name__}: {exc}"
            stop.wait(max(0.0, self.config.interval - (time.monotonic() - started)))

    def set_allocation(self, kv_allocated: int, compute: dict[str, int]) -> None:
        """The context was made larger or smaller: what it holds now."""
        self.kv_allocated = kv_allocated
        self.compute = dict(compute)

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive() and not self._stop.is_set():
            return
        # each thread has its own stop event: a sampler still ending after a stop() that timed out is not
        # woken again by this start, and ends on its own
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name="vramchat-telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Ask the sampler to end and wait up to `timeout` seconds; `running` stays true if it has not ended."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def latest(self) -> Sample | None:
        with self._lock:
            return self._samples[-1] if self._samples else None

    def history(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)


def for_engine(
    engine: LoadedEngine,
    report: DeviceReport,
    plan: MemoryPlan | None,
    config: TelemetryConfig | None = None,
    speed: Callable[[], tuple[float, bool]] | None = None,
    plan_now: Callable[[], MemoryPlan | None] | None = None,
) -> Telemetry:
    """A sampler for a loaded engine: GPUs through llama.cpp's device API (or simulated, following
    `plan`), host RAM and RSS through psutil, arena and KV as llama.cpp logged them at load (the
    plan's figures when the log said nothing), KV in use from the plan's layout. `speed` replaces
    the engine's own tokens/s reading (the app shows zero between replies); `plan_now` gives the plan for
    the context held now, which simulated GPUs follow."""
    from app.devices.host import process_rss, rss_reader
    from app.devices.live import GpuMemoryReader, HostMemoryReader

    def loaded() -> bool:
        return engine.loaded

    def engine_speed() -> tuple[float, bool]:
        return engine.last_stats.live_tokens_per_second(), engine.generating.is_set()

    measured = engine.report.measurements if engine.report is not None else None
    compute = dict(measured.compute) if measured is not None else {}
    kv_allocated = sum(measured.kv.values()) + sum(measured.kv_swa.values()) if measured is not None else 0
    if plan is not None and not compute:
        compute = {b.name: b.bytes for b in plan.buffers if b.kind == "compute"}  # named as llama.cpp logs them
    kv_maximum = sum(b.bytes for b in plan.buffers if b.kind in ("kv", "kv_swa")) if plan is not None else 0
    if plan is not None and not kv_allocated:
        kv_allocated = kv_maximum
    rss: Callable[[], int]
    pid = engine.pid  # the engine process, where the model's memory is
    try:
        rss = rss_reader(pid)
    except Exception:  # psutil unusable: the sampler records each failed read instead
        rss = process_rss
    return Telemetry(
        memory=GpuMemoryReader(report, plan, loaded, plan_now, allocated=lambda: _allocated_per_gpu(engine, report)),
        rss=rss,
        engine=engine,
        kv_layout=plan.kv if plan is not None else None,
        kv_allocated=kv_allocated,
        compute=compute,
        kv_maximum=kv_maximum,
        speed=speed or engine_speed,
        config=config or TelemetryConfig(),
        host_memory=HostMemoryReader(report, plan, loaded, plan_now),
        unified=frozenset(d.name for d in report.gpus if d.unified),
    )


def _allocated_per_gpu(engine: LoadedEngine, report: DeviceReport) -> dict[str, int]:
    """The bytes llama.cpp's log says the loaded model holds on each GPU (every buffer kind)."""
    from app.devices.buffer_names import device_of

    if engine.report is None:
        return {}
    names = [d.name for d in report.gpus]
    out: dict[str, int] = {}
    for _, sizes in engine.report.measurements.tables():
        for buffer, size in sizes.items():
            device = device_of(buffer, names)
            if device in names:
                out[device] = out.get(device, 0) + size
    return out
