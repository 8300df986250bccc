"""The llama.cpp engine and the pieces around it: log capture, planned vs actual.

What the app's own process needs of an engine is importable from here without llama.cpp
(`app.engine.types`); the engine itself is `app.engine.engine.Engine`, which only the engine
process (and tests and benches that run llama.cpp in process) imports. The names below are
imported as they are first asked for: the picker's start needs none of the planner's memory
model that `BufferComparison` brings (`from app.engine import GenerationParams` stays cheap).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.engine.llama_log import Measurements
    from app.engine.planned_actual import BufferComparison
    from app.engine.types import EngineError, GenerationParams, GenerationStats, LoadReport, ResizeReport

_HOMES = {
    "BufferComparison": "app.engine.planned_actual",
    "Measurements": "app.engine.llama_log",
    "EngineError": "app.engine.types",
    "GenerationParams": "app.engine.types",
    "GenerationStats": "app.engine.types",
    "LoadReport": "app.engine.types",
    "ResizeReport": "app.engine.types",
}

__all__ = [
    "BufferComparison",
    "EngineError",
    "GenerationParams",
    "GenerationStats",
    "LoadReport",
    "Measurements",
    "ResizeReport",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # asked once
    return value
