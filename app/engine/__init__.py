"""The llama.cpp engine and the pieces around it: log capture, planned vs actual.

What the app's own process needs of an engine is importable from here without llama.cpp
(`app.engine.types`); the engine itself is `app.engine.engine.Engine`, which only the engine
process (and tests and benches that run llama.cpp in process) imports.
"""

from app.engine.llama_log import Measurements
from app.engine.planned_actual import BufferComparison
from app.engine.types import EngineError, GenerationParams, GenerationStats, LoadReport, ResizeReport

__all__ = [
    "BufferComparison",
    "EngineError",
    "GenerationParams",
    "GenerationStats",
    "LoadReport",
    "Measurements",
    "ResizeReport",
]
