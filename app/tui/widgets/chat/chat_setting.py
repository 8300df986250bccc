"""Where /system and /temp change a chat's settings: one function, for per-chat settings to replace.

Until the store keeps settings with each chat, this does what the chat settings dialog (F4) does
today: the system prompt is kept with the open chat (with none open yet, it becomes the default a
new chat starts with), and the temperature is the one setting every chat is sampled at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from app.store import Conversation
    from app.tui.services import Services


class SettingsHolder(Protocol):
    """The chat screen, as far as a setting goes."""

    services: Services
    conversation: Conversation | None

    def update_context_line(self) -> None: ...


def set_chat_setting(
    chat: SettingsHolder, name: Literal["system_prompt", "temperature"], value: str | float | None
) -> str:
    """Set `name` for the chat `chat` shows (the system prompt: a str; the temperature: a float, None for
    the model's own). Returns where it applies, for the toast to say: "This chat", "New chats", "Every chat"."""
    services = chat.services
    settings = services.settings
    scope = "Every chat"
    if name == "system_prompt":
        text = str(value or "")
        if chat.conversation is not None:
            services.store.set_system_prompt(chat.conversation.id, text)
            chat.conversation.system_prompt = text
            scope = "This chat"
        else:
            settings.system_prompt = text
            services.save_settings()
            scope = "New chats"
    else:
        settings.temperature = None if value is None else float(value)
        services.save_settings()
    chat.update_context_line()
    return scope


def chat_setting(chat: SettingsHolder, name: Literal["system_prompt", "temperature"]) -> str | float | None:
    """What `name` is for the chat shown now."""
    if name == "system_prompt":
        return chat.conversation.system_prompt if chat.conversation else chat.services.settings.system_prompt
    return chat.services.settings.temperature
