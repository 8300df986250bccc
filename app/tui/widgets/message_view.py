"""One message of the conversation: who said it, the pictures sent with it, then the text as Markdown.

A streaming reply is drawn at most ten times a second, whatever the model's speed: each drawing
lays the screen out again (the memory panel beside it included), so a fast model would otherwise
cost the UI a layout per token. Under another screen (the full dashboard) it waits to be seen."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from app.media import Attachment
from app.tui.widgets.picture import Picture

DRAW_SECONDS = 0.1
HIDDEN_DRAW_SECONDS = 0.5  # how often a reply under another screen checks whether it is seen again


# the keys of a focused message: each runs an action of the chat screen
MESSAGE_KEYS: list[BindingType] = [
    Binding("up", "screen.focus_message(-1)", "Earlier message", show=False),
    Binding("down", "screen.focus_message(1)", "Later message", show=False),
    Binding("left", "screen.alternative(-1)", "Previous alternative", show=False),
    Binding("right", "screen.alternative(1)", "Next alternative", show=False),
    Binding("e", "screen.edit_message", "Edit", show=False),
    Binding("escape", "screen.leave_messages", "Back to the message box", show=False),
]


class MessageView(Vertical):
    """Focusable: app.tui.widgets.chat.message_focus moves the focus among messages (its keys: MESSAGE_KEYS)."""

    DEFAULT_CSS = """
    MessageView { height: auto; }
    """
    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = [*MESSAGE_KEYS]

    def __init__(
        self,
        role: str,
        text: str,
        *,
        author: str = "",
        note: str = "",
        msg_id: int = 0,
        pictures: tuple[tuple[Attachment, Path | None, str], ...] = (),
        place: tuple[int, int] = (1, 1),
    ) -> None:
        """`pictures`: (attachment, the file kept for it, a note such as "scaled for the model"); `place`:
        (which, of how many) among the alternatives at its branch point, shown as "‹ 1/2 ›" when several."""
        super().__init__(classes=f"message {role}")
        self.role = role
        self.text = text
        self.author = author or {"user": "You", "assistant": "Model", "system": "System"}.get(role, role)
        self.note = note
        self.msg_id = msg_id
        self.pictures = pictures
        self.place = place
        self._stream: MarkdownStream | None = None
        self._pending = ""  # streamed, not drawn yet
        self._flush: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="message-author")
        for attachment, path, note in self.pictures:
            yield Picture(attachment, path, note)
        if self.text or not self.pictures:
            yield Markdown(self.text, classes="message-body")

    def _header(self) -> Text:
        header = Text(self.author, style="bold")
        which, count = self.place
        if count > 1:
            header.append(f"  ‹ {which}/{count} ›", style="bold")
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
        self._pending += piece
        if self._flush is None:
            self._flush = self.set_timer(DRAW_SECONDS, self._draw_pending)

    async def _draw_pending(self, force: bool = False) -> None:
        self._flush = None
        if not force and self.is_attached and self.app.screen is not self.screen:
            # another screen on top (the full dashboard, say): Textual repaints the whole top screen
            # for every change of the one under it, so the reply is drawn once the chat is back
            self._flush = self.set_timer(HIDDEN_DRAW_SECONDS, self._draw_pending)
            return
        piece, self._pending = self._pending, ""
        if not piece:
            return
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(Markdown))
        await self._stream.write(piece)

    async def finish(self, text: str, note: str = "") -> None:
        if self._flush is not None:
            self._flush.stop()
        await self._draw_pending(force=True)
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        if text != self.text:
            self.text = text
            await self.query_one(Markdown).update(text)
        self.set_note(note)
