"""The llama.cpp engine and the pieces around it: log capture, chat formats."""

from app.engine.engine import Engine, EngineError, GenerationParams, GenerationStats, LoadReport
from app.engine.llama_log import Measurements

__all__ = ["Engine", "EngineError", "GenerationParams", "GenerationStats", "LoadReport", "Measurements"]
