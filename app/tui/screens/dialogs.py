"""Modal dialogs: a yes/no question, the chat settings (system prompt and sampling, saved with the chat)
and the RPC servers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from app.conversation.sampling import PRESETS, ChatSampling, parse, preset
from app.terminal_text import terminal_safe


class ConfirmDialog(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self, title: str, text: str, confirm: str = "OK", danger: bool = False, focus_confirm: bool = False
    ) -> None:
        super().__init__(classes="dialog-screen")
        # the words carry paths, llama.cpp's and servers' errors: nothing in them may command the terminal
        self.title_text, self.text = terminal_safe(title), terminal_safe(text, multiline=True)
        self.confirm, self.danger = confirm, danger
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
    sampling: ChatSampling  # the chat's own; unset values are the model's (app.conversation.sampling)


# the sampling fields in the dialog: (field, label, input id)
SAMPLING_FIELDS = (
    ("temperature", "temp", "temperature"),
    ("top_p", "top-p", "top-p"),
    ("top_k", "top-k", "top-k"),
    ("min_p", "min-p", "min-p"),
    ("repeat_penalty", "repeat", "repeat-penalty"),
    ("seed", "seed", "seed"),
    ("max_tokens", "max tokens", "max-tokens"),
)


class ChatSettingsDialog(ModalScreen["ChatSettings | None"]):
    """The chat's system prompt and sampling, saved with the chat; an empty field is the model's own."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "save", "Save")]

    def __init__(self, current: ChatSettings, scope: str = "this chat", model_own: str = "") -> None:
        """`scope`: whose settings ("this chat", "the next chat"); `model_own`: the model's values, in words."""
        super().__init__(classes="dialog-screen")
        self.current = current
        self.scope = scope
        self.model_own = model_own

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide", id="chat-settings"):
            yield Label(f"Chat settings: {self.scope}", classes="dialog-title")
            yield Label("System prompt")
            yield TextArea(self.current.system_prompt, id="system-prompt", soft_wrap=True, tab_behavior="focus")
            with Horizontal(classes="sampling-row", id="presets"):
                yield Label("Sampling, empty: the model's own. ")
                for name in PRESETS:
                    yield Button(name.capitalize(), id=f"preset-{name}", compact=True)
            values = self.current.sampling
            for row in (SAMPLING_FIELDS[:4], SAMPLING_FIELDS[4:]):
                with Horizontal(classes="sampling-row"):
                    for name, label, input_id in row:
                        yield Label(f"{label} ")
                        value = getattr(values, name)
                        yield Input(
                            "" if value is None else f"{value:g}",
                            id=input_id,
                            compact=True,
                            restrict=r"[0-9.]*",
                            classes="sampling-value",
                        )
            if self.model_own:
                yield Static(self.model_own, classes="dialog-note", markup=False)
            yield Static("", id="settings-error", classes="dialog-error", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Save", id="save", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#system-prompt", TextArea).focus()

    @on(Button.Pressed, ".sampling-row Button")
    def _preset(self, event: Button.Pressed) -> None:
        chosen = preset((event.button.id or "").removeprefix("preset-"))
        for name, _label, input_id in SAMPLING_FIELDS[:5]:
            value = getattr(chosen, name)
            self.query_one(f"#{input_id}", Input).value = "" if value is None else f"{value:g}"

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        error = self.query_one("#settings-error", Static)
        sampling = self.current.sampling
        for name, _label, input_id in SAMPLING_FIELDS:
            try:
                sampling = sampling.set(name, parse(name, self.query_one(f"#{input_id}", Input).value))
            except ValueError as exc:
                error.update(str(exc)[:1].upper() + str(exc)[1:])
                return
        self.dismiss(ChatSettings(self.query_one("#system-prompt", TextArea).text.strip(), sampling))

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
