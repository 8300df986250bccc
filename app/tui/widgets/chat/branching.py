"""Edit and branch in the chat: an earlier message of yours edited and sent again becomes an alternative
to it (the store keeps both: app.store.tree), and the alternatives of a message are stepped through.

The edit happens in the message box: `Ctrl+E` (or `e` on a focused message) puts the message there and
the box's title says so; `Enter` sends it as a new branch from that point, `Esc` drops the edit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.tui.widgets.chat.message_focus import focus_step, focused_message, mark, message_views

if TYPE_CHECKING:
    from app.store import StoredMessage
    from app.tui.widgets.chat.view import ChatView

__all__ = ["begin_edit", "cancel_edit", "end_edit", "focus_step", "leave_messages", "mark", "step_alternative"]


def begin_edit(screen: ChatView) -> None:
    """The focused message of yours (on a reply: the message it answers; else your last one) into the
    message box, to be sent as a branch."""
    views = message_views(screen)
    focused = focused_message(screen)
    before = views[: views.index(focused) + 1] if focused is not None else views  # a reply: the message it answers
    target = next((v for v in reversed(before) if v.role == "user"), None)
    if target is None or screen.conversation is None:
        screen.app.notify("There is no message of yours to edit yet.", severity="warning")
        return
    screen.editing = target.msg_id
    screen.input.load_text(target.text)
    screen.input.show_editing(True)
    screen.set_focus(screen.input)  # at once: what is typed next edits the message
    screen.input.move_cursor(screen.input.document.end)


def end_edit(screen: ChatView) -> StoredMessage | None:
    """The edit is over (sent, or another chat opened): the message that was edited, if any."""
    msg_id, screen.editing = screen.editing, None
    screen.input.show_editing(False)
    return screen.services.store.message(msg_id) if msg_id is not None else None


def cancel_edit(screen: ChatView) -> None:
    end_edit(screen)
    screen.input.clear()
    screen.app.notify("Edit dropped.", timeout=2)


def leave_messages(screen: ChatView) -> None:
    """Esc on a focused message: a reply being written stops; the focus returns to the message box."""
    if screen.generating:
        screen.action_stop()
    screen.input.focus()


async def step_alternative(screen: ChatView, step: int) -> None:
    """Show the alternative `step` places from the focused message's (else from the last reply's)."""
    if screen.generating:
        screen.app.notify("Wait for the reply to end (Esc stops it).", severity="warning")
        return
    views = message_views(screen)
    focused = focused_message(screen)
    target = focused or next((v for v in reversed(views) if v.role == "assistant"), None)
    if target is None or target.place[1] <= 1:
        screen.app.notify(
            "This message has no alternatives: Ctrl+R asks for another reply, Ctrl+E edits a message of yours.",
            timeout=4,
        )
        return
    index = views.index(target)
    chosen = screen.services.store.step_alternative(target.msg_id, step)
    if chosen is None:
        screen.app.bell()
        return
    await screen.redraw()
    again = message_views(screen)
    if focused is not None and index < len(again):  # the focus stays where it was: on the message, or in the box
        mark(screen, again[index])
    screen.refresh_chat_list()
