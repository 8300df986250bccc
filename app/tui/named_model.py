"""The model the model list was asked for by name: the one the command line named (`vramchat MODEL --ctx
512`), or one just downloaded. It is found in the list under any of its paths, listed even where no folder
scanned holds it, selected first, and the command line's plan knobs go with its first selection."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.catalog import CatalogEntry
    from app.planning import PlanChoice


class NamedModel:
    def __init__(self, path: str | None, source: str, autoload: bool) -> None:
        self.path = os.path.abspath(path) if path else None
        self.source = source  # what the list says of the file where no folder scanned holds it
        self.autoload = autoload  # `vramchat MODEL`: loaded once its plan comes, if it fits
        self._knobs_used = False  # the command line's plan knobs apply to the model's first selection

    def rename(self, path: str, source: str) -> None:
        """Another model asked for (`source`: where it comes from, "downloaded")."""
        self.path, self.source = os.path.abspath(path), source

    def is_entry(self, key: str, entries: dict[str, CatalogEntry]) -> bool:
        """Whether the list's entry `key` is this model (its file, under any path)."""
        if self.path is None:
            return False
        entry = entries.get(key)
        return key == self.path or (
            entry is not None and os.path.realpath(entry.file.path) == os.path.realpath(self.path)
        )

    def key_in(self, entries: dict[str, CatalogEntry]) -> str | None:
        """The model's key in the list, if it is listed."""
        if self.path is None or self.path in entries:
            return self.path
        real = os.path.realpath(self.path)
        return next((k for k, e in entries.items() if os.path.realpath(e.file.path) == real), None)

    def knobs_for(self, key: str, entries: dict[str, CatalogEntry], choice: PlanChoice | None) -> PlanChoice | None:
        """The command line's `choice` where `key` is this model selected the first time (`vramchat MODEL
        --ctx 512 --ubatch 128`); None for every other selection (every field on auto)."""
        if self.is_entry(key, entries) and not self._knobs_used:
            self._knobs_used = True
            return choice
        return None
