"""The focus among the chat's messages: the keyboard's way to act on one message.

Each MessageView can take the focus. `Alt+Up` in the chat focuses the last message; then `Up`/`Down`
move to the one before or after, `Esc` returns to the message box. On a focused message, `Left`/`Right`
step through its alternatives ("‹ 1/2 ›": a retried reply, an edited message) and `e` edits it (one of
yours). Any other per-message key (copy, say) finds its message with `focused_message(screen)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.tui.widgets.message_view import MessageView

if TYPE_CHECKING:
    from app.tui.widgets.chat.view import ChatView


def message_views(screen: ChatView) -> list[MessageView]:
    """The messages on screen, first to last."""
    return list(screen.query(MessageView))


def focused_message(screen: ChatView) -> MessageView | None:
    """The message that has the focus (None: the focus is elsewhere, the message box say)."""
    focused = screen.focused
    return focused if isinstance(focused, MessageView) else None


def focus_step(screen: ChatView, step: int) -> MessageView | None:
    """Focus the message `step` places from the focused one (from elsewhere: the last); None past either end."""
    views = message_views(screen)
    if not views:
        return None
    current = focused_message(screen)
    at = len(views) - 1 if current is None else views.index(current) + step
    if not 0 <= at < len(views):
        return None
    views[at].focus()
    views[at].scroll_visible()
    return views[at]
