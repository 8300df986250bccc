"""One message of the conversation: who said it, the pictures sent with it, then the text as Markdown.

A streaming reply is drawn at most ten times a second, whatever the model's speed: each drawing
lays the screen out again (the memory panel beside it included), so a fast model would otherwise
cost the UI a layout per token. Under another screen (the full dashboard) it waits to be seen."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from app.attachments import Attachment
from app.conversation.reasoning import ReplySplitter, Thought, answer_of, split_reply
from app.terminal_text import terminal_safe
from app.tui.widgets.chat.thought import ThoughtFold, thinking_title
from app.tui.widgets.markdown_text import shows_text
from app.tui.widgets.picture import Picture

DRAW_SECONDS = 0.1
HIDDEN_DRAW_SECONDS = 0.5  # how often a reply under another screen checks whether it is seen again


class MessageView(Vertical):
    """One message; the message list (app.tui.widgets.chat.message_select) marks it for the keys that act on it."""

    DEFAULT_CSS = """
    MessageView { height: auto; }
    MessageView .message-plain { display: none; }
    MessageView.-plain .message-plain { display: block; }
    MessageView.-plain .message-body { display: none; }
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
        thought: str = "",
        place: tuple[int, int] = (1, 1),
        empty: str = "",
    ) -> None:
        """`pictures`: (attachment, the file kept for it, a note such as "scaled for the model").
        `text` is the message as stored: a reply's reasoning, with its markers, is shown folded above its
        answer (app/tui/widgets/chat/thought.py), `thought` the fold's words. `place`: (which, of how
        many) among the alternatives at its branch point, shown as "‹ 1/2 ›" when several. `empty`: what a reply
        that wrote nothing is called, shown in its place (it stays in the transcript)."""
        super().__init__(classes=f"message {role}")
        self.role = role
        self.text = text
        self.thought = thought
        self._splitter = ReplySplitter()
        self._answer = ""  # the answer as drawn (a reply without reasoning: all of it)
        self.author = author or {"user": "You", "assistant": "Model", "system": "System"}.get(role, role)
        self.note = note
        self.msg_id = msg_id
        self.pictures = pictures
        self.place = place
        self._stream: MarkdownStream | None = None
        self._pending = ""  # streamed, not drawn yet
        self._flush: Timer | None = None
        self._empty = empty
        self._shows_words = False  # the Markdown drawn shows words (then it always will: text only grows)

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="message-author")
        for attachment, path, note in self.pictures:
            yield Picture(attachment, path, note)
        split = split_reply(self.text) if self.role == "assistant" else None
        if split is not None and split.has_reasoning:
            yield ThoughtFold(split.reasoning, self.thought or "Thought")
        self._answer = split.answer if split is not None else self.text
        if self.text or not self.pictures:
            yield Markdown(_safe(self._answer), classes="message-body")
            yield Static(_safe(self._answer), classes="message-plain", markup=False)

    def on_mount(self) -> None:
        self._show_plain_if_blank()

    def _show_plain_if_blank(self) -> None:
        """A reply whose Markdown shows no words (" 1. 2. 3." is empty nested lists) is shown as its text."""
        if self._shows_words or not self.query(".message-plain"):
            return
        self._shows_words = shows_text(self._answer)
        empty = not self._answer.strip() and bool(self._empty)
        plain = not self._shows_words and (bool(self._answer.strip()) or empty)
        if plain:
            shown = Text(f"({self._empty})", style="italic dim") if empty else Text(_safe(self._answer))
            self.query_one(".message-plain", Static).update(shown)
        self.set_class(plain, "-plain")
        self.set_class(empty, "-empty")

    @property
    def answer(self) -> str:
        """What the message says, without a reply's reasoning (what a copy of it means)."""
        return answer_of(self.text) if self.role == "assistant" else self.text

    def _header(self) -> Text:
        header = Text(terminal_safe(self.author), style="bold")
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
        """Stream a piece of the reply (leading blanks of the reply are dropped); its reasoning goes to
        the fold above the answer."""
        self.text += piece
        thought, piece = self._splitter.feed(piece)
        await self._think(thought)
        if not self._answer:
            piece = piece.lstrip()
            if not piece:
                return
        self._answer += piece
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
        await self._stream.write(_safe(piece))
        self._show_plain_if_blank()

    async def _think(self, thought: str) -> None:
        """The fold: mounted at the reply's first thought, counting while the model thinks."""
        split = self._splitter.split
        folds = list(self.query(ThoughtFold).results())
        fold = folds[0] if folds else None
        if fold is None and split.has_reasoning:
            fold = ThoughtFold("", thinking_title(0))
            await self.mount(fold, before=self.query_one(Markdown))
            fold.think()
        if fold is None:
            return
        if thought:
            fold.add(thought)
        if fold.ticking and not split.thinking:
            fold.stop()

    async def finish(self, text: str, note: str = "", thought: Thought | None = None, empty: str = "") -> None:
        """The reply ended: `text` as saved, `note` under its author, `thought` the engine's figures, `empty` what
        it is called when it wrote nothing."""
        self._empty = empty
        if self._flush is not None:
            self._flush.stop()
        await self._draw_pending(force=True)
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.text = text
        split = split_reply(text)
        for fold in self.query(ThoughtFold).results():
            fold.stop(thought)
            if fold.reasoning != split.reasoning:
                fold.set_reasoning(split.reasoning)
        if split.answer != self._answer:
            self._answer = split.answer
            self._shows_words = False
            await self.query_one(Markdown).update(_safe(split.answer))
        self._show_plain_if_blank()
        self.set_note(note)


def _safe(text: str) -> str:
    """A message's text as drawn: it comes from a model or a paste, so nothing in it may command the terminal."""
    return terminal_safe(text, multiline=True)
