"""The palette's commands for a chat as a tree and for managing chats (each also has a key: F1 lists them)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from textual.app import SystemCommand

if TYPE_CHECKING:
    from app.tui.screens.chat import ChatScreen


def chat_tree_commands(screen: ChatScreen) -> Iterator[SystemCommand]:
    yield SystemCommand(
        "Edit a message",
        "Your last (or the focused) message, sent again as a new branch (Ctrl+E)",
        screen.action_edit_message,
    )
    yield SystemCommand(
        "Previous alternative",
        "Of the last reply or the focused message (Alt+Left)",
        partial(screen.run_action, "alternative(-1)"),
    )
    yield SystemCommand(
        "Next alternative",
        "Of the last reply or the focused message (Alt+Right)",
        partial(screen.run_action, "alternative(1)"),
    )
    yield SystemCommand(
        "Focus the messages",
        "Up/Down move, Left/Right alternatives, e edits, Esc back (Alt+Up)",
        partial(screen.run_action, "focus_message(-1)"),
    )
