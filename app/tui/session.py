"""The loaded model: engine, plan, chat format, telemetry. Driven from worker threads.

The app holds one session. `load` runs in a worker (it takes seconds); `generate`
runs in a worker too and streams through `app.chat`. Only `stop()` is called from
the UI thread while a worker runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from app.devices import DeviceReport
from app.engine import GenerationParams, GenerationStats, LoadReport
from app.engine.templates import ChatFormat, choose_format
from app.telemetry import Telemetry, for_engine
from planner.config import LoadConfig
from planner.fit import FitResult
from planner.memory import MemoryPlan
from planner.model import ModelAnatomy


class EngineLike(Protocol):
    """What the app needs of an engine (app.engine.Engine, or a fake in fast UI tests)."""

    report: LoadReport | None
    last_stats: GenerationStats

    @property
    def loaded(self) -> bool: ...

    def load(self, path: str, config: LoadConfig, progress: Callable[[float], bool | None] | None = None
             ) -> LoadReport: ...
    def generate(self, prompt: list[int] | str, params: GenerationParams | None = None) -> Iterator[str]: ...
    def stop(self) -> None: ...
    def unload(self) -> None: ...
    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]: ...
    def special_text(self, which: str) -> str: ...
    def kv_cells_used(self) -> int: ...


@dataclass
class LoadedModel:
    path: str
    anatomy: ModelAnatomy
    fit: FitResult
    report: LoadReport
    fmt: ChatFormat
    eos: str

    @property
    def plan(self) -> MemoryPlan:
        return self.fit.plan

    @property
    def n_ctx(self) -> int:
        return self.report.n_ctx

    @property
    def name(self) -> str:
        return self.anatomy.name or self.path.rsplit("/", 1)[-1]


def default_engine() -> EngineLike:
    from app.engine import Engine

    return Engine()


class ModelSession:
    def __init__(self, engine_factory: Callable[[], EngineLike] = default_engine) -> None:
        self._factory = engine_factory
        self._engine: EngineLike | None = None
        self.model: LoadedModel | None = None
        self.telemetry: Telemetry | None = None
        self.generating = threading.Event()

    @property
    def engine(self) -> EngineLike:
        if self._engine is None:
            self._engine = self._factory()
        return self._engine

    def load(self, path: str, anatomy: ModelAnatomy, fit: FitResult, devices: DeviceReport,
             progress: Callable[[float], bool | None] | None = None) -> LoadedModel:
        """Load exactly the plan's configuration (worker thread)."""
        self.unload()
        engine = self.engine
        report = engine.load(path, fit.plan.config, progress=progress)
        fmt = choose_format(anatomy.metadata, anatomy.architecture, path.rsplit("/", 1)[-1])
        self.model = LoadedModel(path, anatomy, fit, report, fmt, engine.special_text("eos"))
        self.telemetry = for_engine(engine, devices, fit.plan, speed=self._speed)  # type: ignore[arg-type]
        self.telemetry.start()
        return self.model

    def _speed(self) -> tuple[float, bool]:
        engine = self._engine
        if engine is None:
            return 0.0, False
        generating = self.generating.is_set()
        # while idle the graph drops to zero; the dashboard keeps the last reply's speed in words
        return (engine.last_stats.live_tokens_per_second() if generating else 0.0), generating

    def stop(self) -> None:
        if self._engine is not None:
            self._engine.stop()

    def unload(self) -> None:
        if self.telemetry is not None:
            self.telemetry.stop()
            self.telemetry = None
        if self._engine is not None and self.model is not None:
            self._engine.unload()
        self.model = None

    def close(self) -> None:
        self.stop()
        self.unload()
