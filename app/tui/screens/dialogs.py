"""Modal dialogs: a yes/no question, the chat settings (system prompt, temperature, max tokens) and the
RPC servers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from app.limits import MAX_TOKENS
from app.tui.widgets.fitting_input import FittingInput

# the empty temperature's hint, longest first (app.tui.widgets.fitting_input)
TEMPERATURE_HINTS = ("the model's own (greedy for base models)", "the model's own (base: greedy)", "the model's own")


class ConfirmDialog(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self, title: str, text: str, confirm: str = "OK", danger: bool = False, focus_confirm: bool = False
    ) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text, self.text, self.confirm, self.danger = title, text, confirm, danger
        self.focus_confirm = focus_confirm

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.text, classes="dialog-text", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button(self.confirm, id="confirm", variant="error" if self.danger else "primary")

    def on_mount(self) -> None:
        self.query_one("#confirm" if self.focus_confirm else "#cancel", Button).focus()

    @on(Button.Pressed, "#confirm")
    def _confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


@dataclass(frozen=True)
class ChatSettings:
    system_prompt: str
    temperature: float | None  # None: the model's own (app.sampling)
    max_tokens: int


class ChatSettingsDialog(ModalScreen["ChatSettings | None"]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "save", "Save")]

    def __init__(self, current: ChatSettings) -> None:
        super().__init__(classes="dialog-screen")
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("Chat settings", classes="dialog-title")
            yield Label("System prompt (applies to this chat and new ones)")
            yield TextArea(self.current.system_prompt, id="system-prompt", soft_wrap=True, tab_behavior="focus")
            with Horizontal(classes="dialog-row"):
                with Vertical():
                    yield Label("Temperature (0 = greedy, up to 2)")
                    yield FittingInput(
                        "" if self.current.temperature is None else f"{self.current.temperature:g}",
                        hints=TEMPERATURE_HINTS,
                        id="temperature",
                        restrict=r"[0-9.]*",
                    )
                with Vertical():
                    yield Label("Max tokens per reply")
                    yield Input(str(self.current.max_tokens), id="max-tokens", restrict=r"[0-9]*")
            yield Static("", id="settings-error", classes="dialog-error", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Save", id="save", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#system-prompt", TextArea).focus()

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        error = self.query_one("#settings-error", Static)
        text = self.query_one("#temperature", Input).value.strip()
        try:
            temperature = float(text) if text else None
        except ValueError:
            error.update("Temperature must be a number such as 0.7 (empty: the model's own)")
            return
        if temperature is not None and not 0 <= temperature <= 2:
            error.update("Temperature must be between 0 and 2")
            return
        try:
            max_tokens = int(self.query_one("#max-tokens", Input).value or "0")
        except ValueError:
            max_tokens = 0
        if not 1 <= max_tokens <= MAX_TOKENS:
            error.update(f"Max tokens must be between 1 and {MAX_TOKENS:,}")
            return
        self.dismiss(ChatSettings(self.query_one("#system-prompt", TextArea).text.strip(), temperature, max_tokens))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class RpcServersDialog(ModalScreen["list[str] | None"]):
    """The llama.cpp RPC servers whose devices vramchat uses beside this machine's."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: list[str]) -> None:
        super().__init__(classes="dialog-screen")
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("RPC servers", classes="dialog-title")
            yield Static(
                "Other machines can lend their GPUs (or CPU and RAM): run `vramchat serve-rpc` there, then "
                "give each as HOST:PORT here, separated by commas (empty: none). They are saved in the settings.",
                classes="dialog-text",
            )
            yield Input(", ".join(self.current), placeholder="10.0.0.5:50052, 10.0.0.6:50052", id="rpc-servers")
            yield Static("", id="rpc-error", classes="dialog-error", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Save", id="save", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#rpc-servers", Input).focus()

    @on(Input.Submitted, "#rpc-servers")
    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        from app.rpc.endpoint import parse_endpoints

        text = self.query_one("#rpc-servers", Input).value.strip()
        try:
            endpoints = parse_endpoints(text) if text else []
        except ValueError as exc:
            self.query_one("#rpc-error", Static).update(str(exc))
            return
        self.dismiss([str(e) for e in endpoints])

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
