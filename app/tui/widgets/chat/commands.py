"""The palette's commands for a chat as a tree and for managing chats (each also has a key: F1 lists them).
They call the work itself, not the key's action, which leaves the key to a message box holding text."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from textual.app import SystemCommand

from app.tui.widgets.chat import branching, manage

if TYPE_CHECKING:
    from app.tui.widgets.chat.view import ChatView


def chat_tree_commands(screen: ChatView) -> Iterator[SystemCommand]:
    yield SystemCommand(
        "Edit a message",
        "Your last (or the focused) message, sent again as a new branch (Ctrl+E)",
        partial(branching.begin_edit, screen),
    )
    yield SystemCommand(
        "Previous alternative",
        "Of the last reply or the focused message (Alt+Left)",
        partial(branching.step_alternative, screen, -1),
    )
    yield SystemCommand(
        "Next alternative",
        "Of the last reply or the focused message (Alt+Right)",
        partial(branching.step_alternative, screen, 1),
    )
    yield SystemCommand(
        "Focus the messages",
        "Up/Down move, Left/Right alternatives, e edits, Esc back (Alt+Up)",
        partial(branching.focus_step, screen, -1),
    )


def manage_commands(screen: ChatView) -> Iterator[SystemCommand]:
    yield SystemCommand(
        "Rename this chat", "Or the one highlighted in the list (F6, r)", partial(manage.rename_chat, screen)
    )
    yield SystemCommand(
        "Delete this chat",
        "Or the one highlighted in the list (Delete in the list); Ctrl+Z undoes it",
        partial(manage.delete_chat, screen),
    )
    if screen.deleted:
        yield SystemCommand(
            "Undo the chat's deletion",
            "Bring back the chat deleted last (Ctrl+Z)",
            partial(manage.undo_delete, screen),
        )
