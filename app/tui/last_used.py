"""What the app remembers between starts: the model loaded last (selected in the model list at the next
start, instead of the first row) and the last chat (`vramchat --continue`, or the continue_last_chat
setting): the conversation updated most recently, opened with its model."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.tui.services import Services


@dataclass(frozen=True)
class Start:
    """Where the app starts: the model selected (and whether it loads at once), the chat opened with it,
    and a line to tell the user (the last chat's model is gone, say)."""

    model: str | None = None
    autoload: bool = False
    from_last_use: bool = False  # the model is the one loaded last, not named on the command line
    chat_id: int | None = None
    note: str = ""


def starting_point(services: Services) -> Start:
    options, settings = services.options, services.settings
    if options.continue_chat:
        return _continue(services)
    if options.model:
        return Start(options.model, autoload=True)
    last = settings.last_model
    if last and os.path.isfile(last):
        return Start(last, from_last_use=True)
    return Start()


def _continue(services: Services) -> Start:
    named = services.options.model
    chats = services.store.conversations(limit=1)
    if not chats:
        note = "No chat to continue yet: this one starts the first."
        return Start(named, autoload=named is not None, note=note)
    chat = services.store.conversation(chats[0].id)
    model = named or chat.model_path
    if model and os.path.isfile(model):
        return Start(model, autoload=True, chat_id=chat.id)
    gone = chat.model_name or os.path.basename(chat.model_path) or "its model"
    note = f"The last chat was held with {gone}, which is not on this machine any more: load a model to go on with it."
    return Start(chat_id=chat.id, note=note)


def remember_loaded_model(services: Services) -> None:
    """The model just loaded is the one the next start selects (saved only when it changed)."""
    session = services.started_session()
    model = session.model if session is not None else None
    if model is not None and services.settings.last_model != model.path:
        services.settings.last_model = os.path.abspath(model.path)
        services.save_settings()
