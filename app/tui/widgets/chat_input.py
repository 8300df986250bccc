"""The message box: multi-line; Enter sends, Shift+Enter or Ctrl+J starts a new line."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widgets import TextArea


class ChatInput(TextArea):
    @dataclass
    class Submitted(Message):
        text: str

    DEFAULT_CSS = """
    ChatInput { height: auto; max-height: 10; min-height: 3; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.placeholder = "Ask something… (Enter sends, Shift+Enter or Ctrl+J for a new line)"

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            text = self.text
            if text.strip():
                self.post_message(self.Submitted(text))
            return
        if event.key in ("shift+enter", "ctrl+j", "newline"):
            event.stop()
            event.prevent_default()
            start, end = self.selection
            self.replace("\n", start, end, maintain_selection_offset=False)
            return
        await super()._on_key(event)
