"""Where /system and /temp change a chat's settings: the chat's own, kept with it in the store
(app.tui.widgets.chat.chat_settings, F4's); with no chat open, the next chat's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, cast

from app.tui.widgets.chat import chat_settings

if TYPE_CHECKING:
    from app.store import Conversation
    from app.tui.services import Services
    from app.tui.widgets.chat.view import ChatView


class SettingsHolder(Protocol):
    """The chat screen, as far as a setting goes."""

    services: Services
    conversation: Conversation | None

    def update_context_line(self) -> None: ...


def set_chat_setting(
    chat: SettingsHolder, name: Literal["system_prompt", "temperature"], value: str | float | None
) -> str:
    """Set `name` for the chat `chat` shows (the system prompt: a str; the temperature: a float, None for
    the model's own). Returns where it applies, for the toast to say: "This chat" or "The next chat"."""
    screen = cast("ChatView", chat)
    sampling = chat_settings.sampling_of(screen)
    if name == "system_prompt":
        chat_settings.keep(screen, str(value or ""), sampling)
    else:
        temperature = None if value is None else float(value)
        chat_settings.keep(screen, chat_settings.system_prompt_of(screen), sampling.set("temperature", temperature))
    chat.update_context_line()
    return "This chat" if chat.conversation is not None else "The next chat"


def chat_setting(chat: SettingsHolder, name: Literal["system_prompt", "temperature"]) -> str | float | None:
    """What `name` is for the chat shown now (the temperature: None for the model's own)."""
    screen = cast("ChatView", chat)
    if name == "system_prompt":
        return chat_settings.system_prompt_of(screen)
    return chat_settings.sampling_of(screen).temperature
