"""A chat's new name: one line, Enter keeps it, Esc leaves the name as it was."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from app.store import TITLE_CHARS


class RenameDialog(ModalScreen["str | None"]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str) -> None:
        super().__init__(classes="dialog-screen")
        self.current = title

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Rename the chat", classes="dialog-title")
            yield Input(self.current, id="chat-title", max_length=TITLE_CHARS * 2)
            yield Static("Enter keeps the name, Esc leaves it as it was.", classes="dialog-text", markup=False)

    def on_mount(self) -> None:
        self.query_one("#chat-title", Input).focus()

    @on(Input.Submitted, "#chat-title")
    def _keep(self, event: Input.Submitted) -> None:
        name = " ".join(event.value.split())
        self.dismiss(name or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
