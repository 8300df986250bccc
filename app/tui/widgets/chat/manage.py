"""Chats to manage: delete (undone with Ctrl+Z until the app is next started: the store keeps a deleted
chat marked until then) and rename. The chat is the one highlighted in the list while the list has the
focus, else the open one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.tui.widgets.chat.view import ChatView

UNDO_SECONDS = 8


def skip_while_typing(screen: ChatView, unless: bool = True) -> None:
    """A chat key that a text box binds too is the box's while it holds text (or when `unless` is False):
    the key goes on to it (Ctrl+E to the end of the line, say)."""
    from textual.actions import SkipAction
    from textual.widgets import Input, TextArea

    focused = screen.focused
    holds_text = (isinstance(focused, TextArea) and bool(focused.text)) or (
        isinstance(focused, Input) and bool(focused.value)
    )
    if holds_text or not unless:
        raise SkipAction()


def target_chat(screen: ChatView) -> int | None:
    chosen = screen.past_chats.chosen()
    if chosen is not None:
        return chosen
    return screen.conversation.id if screen.conversation is not None else None


async def delete_chat(screen: ChatView) -> None:
    conv_id = target_chat(screen)
    if conv_id is None:
        screen.app.notify("There is no chat to delete.", severity="warning")
        return
    is_open = screen.conversation is not None and screen.conversation.id == conv_id
    if is_open and screen.generating:
        screen.app.notify("Stop the reply first (Esc).", severity="warning")
        return
    store = screen.services.store
    chats = screen.past_chats
    row = chats.options.highlighted if chats.chosen() is not None else None  # deleted from the list
    title = store.conversation(conv_id).title or "(empty chat)"
    store.trash_conversation(conv_id)
    screen.deleted.append((conv_id, is_open))
    if is_open:
        await screen.action_new_chat()
    screen.refresh_chat_list()
    if row is not None:  # the list keeps the focus, on the chat that took the deleted one's place
        chats.highlight_row(row)
        chats.options.focus()
    screen.app.notify(f"“{title}” deleted: Ctrl+Z undoes it.", title="Chat deleted", timeout=UNDO_SECONDS)


async def undo_delete(screen: ChatView) -> None:
    if not screen.deleted:
        screen.app.notify("No chat was deleted.", timeout=3)
        return
    conv_id, was_open = screen.deleted.pop()
    in_list = screen.past_chats.options.has_focus
    screen.services.store.restore_conversation(conv_id)
    if was_open and screen.conversation is None and not screen.generating:
        await screen.open_conversation(conv_id)
    screen.refresh_chat_list()
    if in_list:  # the list keeps the focus, on the chat brought back
        screen.past_chats.highlight(conv_id)
        screen.past_chats.options.focus()
    screen.app.notify("The chat is back.", timeout=3)


def rename_chat(screen: ChatView) -> None:
    from app.tui.screens.rename import RenameDialog

    conv_id = target_chat(screen)
    if conv_id is None:
        screen.app.notify("There is no chat to rename yet: it is named after its first message.", severity="warning")
        return
    store = screen.services.store

    def renamed(name: str | None) -> None:
        if name:
            store.set_title(conv_id, name)
            if screen.conversation is not None and screen.conversation.id == conv_id:
                screen.conversation.title = name
            screen.refresh_chat_list()
            screen.past_chats.highlight(conv_id)  # still the renamed chat: the next `d` or `r` acts on it

    screen.app.push_screen(RenameDialog(store.conversation(conv_id).title), renamed)
