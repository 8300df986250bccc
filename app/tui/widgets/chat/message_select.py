"""The conversation as a list to move through from the keyboard, one message or code block at a time;
the chat's branch is drawn there from the store (an empty chat: a hint in its place).

Focused (Ctrl+Up from the message box, or /select), the list marks the last message; Up and Down
(or k and j) move through the messages and, after each, its fenced code blocks; `c` (or Enter)
copies what is marked: a message as written (Markdown), a block as its code alone. Esc goes back to
the message box. On a marked message, Left and Right step through its alternatives ("‹ 1/2 ›": a retried
reply, an edited message) and `e` edits it (one of yours): the chat's keys, which find their message with
`focused_message`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static
from textual.widgets.markdown import MarkdownFence

from app.conversation.outcome import empty_reply_marker
from app.tui.widgets.chat.notes import stored_note
from app.tui.widgets.chat.thought import fold_words
from app.tui.widgets.message_view import MessageView

if TYPE_CHECKING:
    from app.attachments import Attachment
    from app.store import Conversation
    from app.tui.widgets.chat.pictures import Picture

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
        # a marked message's branches: the chat screen's actions (app/tui/screens/chat_controller.py)
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

    async def show_branch(
        self, conv: Conversation, pictures: Callable[[tuple[Attachment, ...]], tuple[Picture, ...]]
    ) -> bool:
        """The chat's branch as stored, drawn anew (`pictures`: a message's attachments as its view shows them);
        False when it has no message to show."""
        await self.remove_children()
        views = [
            MessageView(
                m.role,
                m.content,
                author=conv.model_name if m.role == "assistant" else "",
                note=stored_note(m),
                msg_id=m.id,
                pictures=pictures(m.attachments),
                thought=fold_words(m),
                place=(m.alternative, m.alternatives),
                empty=empty_reply_marker(m.stopped_by) if m.role == "assistant" and m.state != "streaming" else "",
            )
            for m in conv.messages
            if m.role != "system"
        ]
        if views:
            await self.mount_all(views)
        return bool(views)

    def show_hint(self, text: str) -> None:
        """The hint in an empty chat; an earlier hint ("No model loaded yet") is brought up to date."""
        hints = list(self.query("#hint").results(Static))
        if self.children and not hints:
            return
        if hints:
            hints[0].update(text)
        else:
            self.mount(Static(text, id="hint", classes="hint", markup=False))

    async def remove_hint(self) -> None:
        for hint in self.query("#hint"):
            await hint.remove()

    def views(self) -> list[MessageView]:
        """The messages shown, first to last."""
        return list(self.query(MessageView))

    @property
    def focused_message(self) -> MessageView | None:
        """The marked message while the list has the focus (None: the focus is elsewhere)."""
        return self.selected_message if self.screen.focused is self else None

    def focus_message(self, view: MessageView) -> MessageView:
        """The focus here with `view` marked, at once (not after the keys already typed)."""
        self.screen.set_focus(self)
        self._mark(view)
        return view

    def step(self, step: int) -> MessageView | None:
        """Mark the message `step` places from the marked one (from elsewhere: the last); None past either end."""
        views = self.views()
        if not views:
            return None
        current = self.focused_message
        at = len(views) - 1 if current is None else views.index(current) + step
        if not 0 <= at < len(views):
            return None
        return self.focus_message(views[at])

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
