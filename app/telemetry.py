"""Live memory telemetry: a bounded time series sampled off the UI thread (about 2 Hz).

Each sample holds device memory used/total per device, the process RSS, the
compute arena and KV cache as allocated (from llama.cpp's log) and the KV cache
in use (cells the conversation occupies times bytes per cell, from the plan),
and generation speed. The UI reads `latest()` / `history()` from its own timer:
the sampler thread never touches widgets.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from planner.kv import KVLayout


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


class EngineView(Protocol):
    """What telemetry reads from the engine (the real Engine, or a fake in UI tests)."""

    def kv_cells_used(self) -> int: ...


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


@dataclass
class TelemetryConfig:
    interval: float = 0.5
    history: int = 1200  # samples kept: 10 minutes at 2 Hz


@dataclass
class Telemetry:
    """Samples in a background thread into a ring buffer; start() / stop() are idempotent."""

    memory: MemoryProbe
    rss: Callable[[], int]
    engine: EngineView | None = None
    kv_layout: KVLayout | None = None
    kv_allocated: int = 0
    compute: dict[str, int] = field(default_factory=dict)
    speed: Callable[[], tuple[float, bool]] = lambda: (0.0, False)
    config: TelemetryConfig = field(default_factory=TelemetryConfig)

    def __post_init__(self) -> None:
        self._samples: deque[Sample] = deque(maxlen=self.config.history)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0
        self.last_error = ""

    def sample_once(self) -> Sample:
        try:
            devices = self.memory()
        except Exception as exc:  # a probe failing mid-run must not kill the sampler
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            devices = {}
        try:
            rss = self.rss()
        except Exception as exc:
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            rss = 0
        cells = self.engine.kv_cells_used() if self.engine is not None else 0
        tps, generating = self.speed()
        sample = Sample(time.monotonic(), devices, rss, dict(self.compute), self.kv_allocated,
                        kv_bytes_in_use(self.kv_layout, cells), cells, tps, generating)
        with self._lock:
            self._samples.append(sample)
        return sample

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.config.interval - (time.monotonic() - started)))

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="vramchat-telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
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
