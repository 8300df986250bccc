"""The llama.cpp engine and the pieces around it: log capture, chat formats, planned vs actual."""

from app.engine.engine import Engine, EngineError, GenerationParams, GenerationStats, LoadReport
from app.engine.llama_log import Measurements
from app.engine.planned_actual import BufferComparison

__all__ = [
    "BufferComparison",
    "Engine",
    "EngineError",
    "GenerationParams",
    "GenerationStats",
    "LoadReport",
    "Measurements",
]
