"""Typed access to an architecture's `<arch>.<key>` metadata, with llama.cpp's defaulting rules:
what the generic reader (planner.anatomy) and every family's rule (planner.archs) read through."""

from __future__ import annotations

from typing import Any

from planner.errors import GGUFError
from planner.gguf import GGUFModel, SkippedArray


class Meta:
    """Typed access to `<arch>.<key>` metadata with llama.cpp's defaulting rules."""

    def __init__(self, gguf: GGUFModel, arch: str) -> None:
        self.md = gguf.metadata
        self.arch = arch
        self.path = gguf.path

    def get(self, key: str, default: Any = None) -> Any:
        return self.md.get(f"{self.arch}.{key}", default)

    def require_int(self, key: str) -> int:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise GGUFError(self.path, f"required metadata {self.arch}.{key} is missing or not an integer")
        return value

    def int_or(self, key: str, default: int) -> int:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            return default
        return value

    def float_or(self, key: str, default: float) -> float:
        value = self.get(key, default)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default

    def per_layer(self, key: str, n_layer: int, default: int) -> list[int]:
        """A key that is either one integer for all layers or an array with one per layer."""
        value = self.get(key)
        if value is None:
            return [default] * n_layer
        if isinstance(value, list):
            if len(value) != n_layer:
                raise GGUFError(self.path, f"{self.arch}.{key} has {len(value)} entries for {n_layer} layers")
            return [int(v) for v in value]
        if isinstance(value, SkippedArray):
            raise GGUFError(self.path, f"{self.arch}.{key} is an array of {value.length} entries, too long")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise GGUFError(self.path, f"{self.arch}.{key} is not a number")
        return [int(value)] * n_layer
