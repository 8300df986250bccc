"""Choosing a picture to attach: a path with completion (Tab takes the suggestion), and the folders
beside it to browse (pictures and sounds only). Answers the path chosen, or None."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Button, DirectoryTree, Input, Label, Static

from app.attachments import AUDIO_SUFFIXES, IMAGE_SUFFIXES

ATTACHABLE = IMAGE_SUFFIXES + AUDIO_SUFFIXES


class PathSuggester(Suggester):
    """Completes a path from what is on disk: the first entry of its folder that starts as typed."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        expanded = os.path.expanduser(value)
        folder, start = os.path.split(expanded)
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            return None
        for name in names:
            if name.startswith(start) and not name.startswith(".") and name != start:
                full = os.path.join(folder, name)
                if os.path.isdir(full):
                    full += os.sep
                elif not name.lower().endswith(ATTACHABLE):
                    continue
                return value[: len(value) - len(start)] + full[len(folder) + (1 if folder else 0) :]
        return None


class PictureTree(DirectoryTree):
    """Folders, and the files vramchat can attach (no hidden ones)."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [p for p in paths if not p.name.startswith(".") and (p.is_dir() or p.suffix.lower() in ATTACHABLE)]


class AttachDialog(ModalScreen["str | None"]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, start: str | None = None) -> None:
        super().__init__(classes="dialog-screen")
        self.start = Path(start or os.getcwd())

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide attach-dialog"):
            yield Label("Attach a picture", classes="dialog-title")
            yield Static(
                "Type or paste its path (Tab completes), or pick it below. Dropping a file on the terminal, or "
                "/image PATH in the message box, attaches it too.",
                classes="dialog-text",
                markup=False,
            )
            yield Input(placeholder=f"{self.start}{os.sep}", id="attach-path", suggester=PathSuggester())
            yield PictureTree(str(self.start), id="attach-tree")
            yield Static("", id="attach-error", classes="dialog-error", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Attach", id="attach", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#attach-path", Input).focus()

    @on(DirectoryTree.FileSelected)
    def _picked(self, event: DirectoryTree.FileSelected) -> None:
        self.query_one("#attach-path", Input).value = str(event.path)
        self._choose()

    @on(Input.Submitted, "#attach-path")
    @on(Button.Pressed, "#attach")
    def _choose(self) -> None:
        value = self.query_one("#attach-path", Input).value.strip().strip("'\"")
        if not value:
            self.query_one("#attach-error", Static).update("Type a path, or pick a file below.")
            return
        path = os.path.expanduser(value)
        if os.path.isdir(path):  # a folder: browse it
            self.query_one("#attach-tree", PictureTree).path = path
            return
        self.dismiss(path)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
