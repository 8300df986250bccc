"""A chat's plan receipts, on demand (F8 in the chat, for the open chat or the one chosen in the
list): the plan it ran with, llama.cpp's dry run and the measured peaks, with a key to copy them
as JSON for a bug report."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from app.conversation.sampling import sampling_words
from app.store.receipt import to_markdown
from app.terminal_text import terminal_safe


def receipts_markdown(title: str, receipts: list[dict[str, Any]], samplings: list[dict[str, Any]] | None = None) -> str:
    """The chat's receipts, and what each reply on screen was sampled with (`samplings`, in order)."""
    if not receipts:
        return (
            f"# Plan receipt: {title}\n\nNo receipt yet: one is kept once the model has replied in this chat "
            "(chats from before this version of vramchat have none)."
        )
    parts = [f"# Plan receipt: {title}"]
    for i, body in enumerate(receipts):
        if len(receipts) > 1:
            parts.append(f"## Load {i + 1} of {len(receipts)}")
        parts.append(to_markdown(body))
    if samplings:
        parts.append("## Sampling")
        parts.append("\n".join(f"- Reply {i + 1}: {sampling_words(s)}" for i, s in enumerate(samplings)))
    parts.append("*`c` copies the receipt as JSON, `Ctrl+S` in the chat exports the chat with it.*")
    return "\n\n".join(parts)


class ReceiptScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,f8,q", "dismiss", "Close"),
        Binding("c", "copy", "Copy JSON"),
    ]

    def __init__(
        self, title: str, receipts: list[dict[str, Any]], samplings: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__()
        self.chat_title = title
        self.receipts = receipts
        self.samplings = samplings or []

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="receipt-box"):
            text = receipts_markdown(self.chat_title, self.receipts, self.samplings)
            yield Markdown(terminal_safe(text, multiline=True))

    def on_mount(self) -> None:
        self.query_one("#receipt-box", VerticalScroll).focus()

    def action_copy(self) -> None:
        if not self.receipts:
            self.app.notify("This chat has no receipt yet.", severity="warning")
            return
        self.app.copy_to_clipboard(json.dumps(self.receipts, indent=2))
        self.app.notify("Copied the receipt as JSON to the clipboard.", timeout=3)
