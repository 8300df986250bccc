"""The message the keyboard acts on: the one the message list marks (app.tui.widgets.chat.message_select).

`Ctrl+Up` or `Alt+Up` in the chat marks the last message; then `Up`/`Down` move through the messages
and their code blocks, `Esc` returns to the message box. On a marked message, `Left`/`Right` step
through its alternatives ("‹ 1/2 ›": a retried reply, an edited message), `e` edits it (one of yours)
and `c` copies it. Any other per-message key finds its message with `focused_message(screen)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.tui.widgets.chat.message_select import MessageList
from app.tui.widgets.message_view import MessageView

if TYPE_CHECKING:
    from app.tui.widgets.chat.view import ChatView


def message_views(screen: ChatView) -> list[MessageView]:
    """The messages on screen, first to last."""
    return list(screen.query(MessageView))


def _message_list(screen: ChatView) -> MessageList:
    found: MessageList = screen.query("#messages").first(MessageList)
    return found


def focused_message(screen: ChatView) -> MessageView | None:
    """The marked message while the message list has the focus (None: the focus is elsewhere)."""
    messages = _message_list(screen)
    return messages.selected_message if screen.focused is messages else None


def focus_step(screen: ChatView, step: int) -> MessageView | None:
    """Mark the message `step` places from the marked one (from elsewhere: the last); None past either end."""
    views = message_views(screen)
    if not views:
        return None
    current = focused_message(screen)
    at = len(views) - 1 if current is None else views.index(current) + step
    if not 0 <= at < len(views):
        return None
    return mark(screen, views[at])


def mark(screen: ChatView, view: MessageView) -> MessageView:
    """Give the message list the focus with `view` marked, at once (not after the keys already typed)."""
    messages = _message_list(screen)
    screen.set_focus(messages)
    messages.mark_message(view)
    return view
