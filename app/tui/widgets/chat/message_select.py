"""The conversation as a list to move through from the keyboard, one message or code block at a time.

Focused (Ctrl+Up from the message box, or /select), the list marks the last message; Up and Down
(or k and j) move through the messages and, after each, its fenced code blocks; `c` (or Enter)
copies what is marked: a message as written (Markdown), a block as its code alone. Esc goes back to
the message box. The marked message is `selected_message` for other keys to act on (edit, say).
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets.markdown import MarkdownFence

from app.tui.widgets.message_view import MessageView

SELECTED = "-selected"


def copied_words(text: str, role: str = "", language: str | None = None) -> str:
    """What a toast says was copied: "Copied the python block, 12 lines", "Copied the reply, 3 lines"."""
    lines = len(text.splitlines()) or 1
    count = f"{lines} line{'s' if lines != 1 else ''}"
    if language is not None:
        return f"Copied the {language or 'code'} block, {count}"
    what = {"user": "your message", "assistant": "the reply"}.get(role, "the message")
    return f"Copied {what}, {count}"


class MessageList(VerticalScroll):
    """The messages of the chat; focused, one message or code block at a time is marked (the class
    -selected, drawn by the app's stylesheet: the messages' own rules there would hide a default one)."""

    class Leave(Message):
        """Esc: the user is done here (the chat puts the focus back in the message box)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Earlier", show=False),
        Binding("down,j", "move(1)", "Later", show=False),
        Binding("home", "move_to(0)", "First", show=False),
        Binding("end", "move_to(-1)", "Last", show=False),
        Binding("c,enter", "copy", "Copy"),
        # a marked message's branches (app.tui.widgets.chat.branching): the chat screen's actions
        Binding("left", "screen.alternative(-1)", "Previous alternative", show=False),
        Binding("right", "screen.alternative(1)", "Next alternative", show=False),
        Binding("e", "screen.edit_message", "Edit"),
        Binding("escape", "leave", "Back to typing"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._marked: Widget | None = None

    @property
    def selected_message(self) -> MessageView | None:
        """The message marked (the one whose code block is marked, when a block is)."""
        marked = self._marked
        if isinstance(marked, MarkdownFence):
            return next((a for a in marked.ancestors if isinstance(a, MessageView)), None)
        return marked if isinstance(marked, MessageView) else None

    def stops(self) -> list[Widget]:
        """What Up and Down move through, top to bottom: each message, then its code blocks."""
        found: list[Widget] = []
        for view in self.query(MessageView):
            found.append(view)
            found.extend(view.query(MarkdownFence))
        return found

    def on_focus(self) -> None:
        """The last message marked (Down goes on to its code blocks)."""
        if self._marked is None or self._marked not in self.stops():
            views = list(self.query(MessageView))
            self._mark(views[-1] if views else None)

    def on_blur(self) -> None:
        self._mark(None)
        if self.max_scroll_y == 0:  # all of it in view: held at the bottom again, as before a message was marked
            self.follow()

    def follow(self) -> None:
        """The end of the conversation in view, and a streaming reply followed (the anchor a marked message
        released is set again: Textual restores it only from a scroll to the very bottom, which a chat shorter
        than the list, drawn at its foot, never makes)."""
        self.scroll_end(animate=False)

    def action_move(self, step: int) -> None:
        stops = self.stops()
        if not stops:
            return
        here = stops.index(self._marked) if self._marked in stops else len(stops)
        self._mark(stops[max(0, min(len(stops) - 1, here + step))])

    def action_move_to(self, index: int) -> None:
        stops = self.stops()
        self._mark(stops[index] if stops else None)

    def action_copy(self) -> None:
        marked = self._marked
        if isinstance(marked, MarkdownFence):
            text, words = marked.code.rstrip("\n"), copied_words(marked.code.rstrip("\n"), language=marked.lexer)
        elif isinstance(marked, MessageView) and marked.answer:  # a reply's reasoning stays out
            text, words = marked.answer, copied_words(marked.answer, marked.role)
        else:
            self.app.notify("Nothing to copy here: Up and Down choose a message.", severity="warning")
            return
        self.app.copy_to_clipboard(text)
        self.app.notify(words, timeout=3)

    def mark_message(self, view: MessageView) -> None:
        """Mark `view` (the list has, or is given, the focus)."""
        self._mark(view)

    def action_leave(self) -> None:
        self._mark(None)
        self.follow()  # back at the bottom, a streaming reply is followed again
        self.post_message(self.Leave())

    def _mark(self, widget: Widget | None) -> None:
        if self._marked is not None:
            self._marked.remove_class(SELECTED)
        self._marked = widget
        if widget is not None:
            widget.add_class(SELECTED)
            self.release_anchor()  # or a streaming reply would pull the view back to the bottom
            self.scroll_to_widget(widget, animate=False)
