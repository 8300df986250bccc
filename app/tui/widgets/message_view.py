"""One message of the conversation: who said it, the pictures sent with it, then the text as Markdown."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from app.media import Attachment
from app.tui.widgets.picture import Picture


class MessageView(Vertical):
    DEFAULT_CSS = """
    MessageView { height: auto; }
    """

    def __init__(
        self,
        role: str,
        text: str,
        *,
        author: str = "",
        note: str = "",
        msg_id: int = 0,
        pictures: tuple[tuple[Attachment, Path | None, str], ...] = (),
    ) -> None:
        """`pictures`: (attachment, the file kept for it, a note such as "scaled for the model")."""
        super().__init__(classes=f"message {role}")
        self.role = role
        self.text = text
        self.author = author or {"user": "You", "assistant": "Model", "system": "System"}.get(role, role)
        self.note = note
        self.msg_id = msg_id
        self.pictures = pictures
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="message-author")
        for attachment, path, note in self.pictures:
            yield Picture(attachment, path, note)
        if self.text or not self.pictures:
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
