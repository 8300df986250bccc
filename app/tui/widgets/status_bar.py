"""A screen's status bar: a line that says what the screen is doing ("Looking in ~/models", "Searching the
hub for 'gemma'"), with its progress while it works; the bar pulses until the work knows how much there is
to do. The model list's scan bar and the hub view's are each one."""

from __future__ import annotations

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar


class StatusBar(Horizontal):
    label = getters.query_one("StatusBar > Label", Label)
    progress = getters.query_one("StatusBar > ProgressBar", ProgressBar)

    def __init__(self, prefix: str, text: str = "", show_percentage: bool = True) -> None:
        """Its parts' ids are `prefix`-bar, `prefix`-status and `prefix`-progress; `text`: what it says first."""
        super().__init__(id=f"{prefix}-bar")
        self._prefix, self._text, self._show_percentage = prefix, text, show_percentage

    def compose(self) -> ComposeResult:
        yield Label(self._text, id=f"{self._prefix}-status", markup=False)
        yield ProgressBar(id=f"{self._prefix}-progress", show_eta=False, show_percentage=self._show_percentage)

    def say(self, text: str | Text) -> None:
        self.label.update(text)

    def working(self, total: int | None = None) -> None:
        """The progress shown from nothing done: pulsing while `total` is not known."""
        self.progress.display = True
        self.progress.update(total=total, progress=0)

    def progressed(self, done: int, total: int) -> None:
        self.progress.update(total=total, progress=done)

    def idle(self) -> None:
        self.progress.display = False
