"""One message of the conversation: who said it, then the text as Markdown."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream


class MessageView(Vertical):
    DEFAULT_CSS = """
    MessageView { height: auto; }
    """

    def __init__(self, role: str, text: str, *, author: str = "", note: str = "", msg_id: int = 0) -> None:
        super().__init__(classes=f"message {role}")
        self.role = role
        self.text = text
        self.author = author or {"user": "You", "assistant": "Model", "system": "System"}.get(role, role)
        self.note = note
        self.msg_id = msg_id
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="message-author")
        yield Markdown(self.text, classes="message-body")

    def _header(self) -> Text:
        header = Text(self.author, style="bold")
        if self.note:
            header.append(f"  {self.note}", style="dim")
        return header

    def set_note(self, note: str) -> None:
        self.note = note
        self.query_one(".message-author", Static).update(self._header())

    async def append(self, piece: str) -> None:
        """Stream a piece of the reply (leading blanks of the reply are dropped)."""
        if not self.text:
            piece = piece.lstrip()
            if not piece:
                return
        self.text += piece
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(Markdown))
        await self._stream.write(piece)

    async def finish(self, text: str, note: str = "") -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        if text != self.text:
            self.text = text
            await self.query_one(Markdown).update(text)
        self.set_note(note)
