"""A one-line input whose hint is the longest of several that fits its width, never a hint cut mid-word
(as the message box chooses among its PLACEHOLDERS)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual import events
from textual.widgets import Input


class FittingInput(Input):
    def __init__(self, value: str = "", *, hints: Sequence[str], **kwargs: Any) -> None:
        """`hints`: the same hint at several lengths, longest first; the last is shown where none fits."""
        super().__init__(value, placeholder=hints[0], **kwargs)
        self.hints = tuple(hints)

    def on_resize(self, event: events.Resize) -> None:
        room = self.content_size.width - 1  # the cursor's cell
        self.placeholder = next((h for h in self.hints if Text(h).cell_len <= room), self.hints[-1])
