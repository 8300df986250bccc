"""The message box: multi-line; Enter sends, Shift+Enter or Ctrl+J starts a new line; a pasted file path
(what a terminal pastes when a file is dropped on it) attaches the file instead of becoming text."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widgets import TextArea

PLACEHOLDERS = (  # the message box's hint, longest first
    "Ask something… (Enter sends, Shift+Enter for a new line, Ctrl+T or /image PATH attaches a picture)",
    "Ask something… (Enter sends, Shift+Enter: new line, /image PATH: a picture)",
    "Ask something… (Enter sends, Shift+Enter: new line)",
    "Ask something…",
)


class ChatInput(TextArea):
    @dataclass
    class Submitted(Message):
        text: str

    @dataclass
    class FilesPasted(Message):
        """The paste was nothing but the paths of files that exist (a file dropped on the terminal)."""

        paths: list[str]

    DEFAULT_CSS = """
    ChatInput { height: auto; max-height: 10; min-height: 3; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.placeholder = PLACEHOLDERS[0]
        self.sees = True  # whether the loaded model can be sent pictures (the hint offers /image then)

    def on_resize(self, event: events.Resize) -> None:
        self._fit_placeholder()

    def offer_pictures(self, sees: bool) -> None:
        """Offer /image in the hint only while the loaded model can see pictures."""
        self.sees = sees
        self._fit_placeholder()

    def _fit_placeholder(self) -> None:
        """The longest hint that fits the box on one row (a cut hint reads as broken)."""
        room = self.content_size.width - 1
        hints = [p for p in PLACEHOLDERS if self.sees or "/image" not in p]
        self.placeholder = next((p for p in hints if len(p) <= room), PLACEHOLDERS[-1])

    async def _on_paste(self, event: events.Paste) -> None:
        """Paths of files attach them; anything else is pasted as text (TextArea's own handler runs next)."""
        from app.media import paths_in

        paths = paths_in(event.text)
        if paths:
            event.stop()
            event.prevent_default()
            self.post_message(self.FilesPasted(paths))

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
