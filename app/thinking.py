"""The chat's thinking switch, for models whose chat template reads `enable_thinking` (Qwen3, GLM-4.5,
...): on, the model reasons before it answers; off, the template tells it not to.

Held per chat for the running app, on by default; the chat's own settings in the store are meant to
keep it (`thinking_for` is the one place that reads it)."""

from __future__ import annotations

from app.engine.templates import ChatFormat
from app.reasoning import has_thinking_switch

DEFAULT_THINKING = True


class ThinkingChoice:
    """Whether each chat thinks; `None` is the chat not started yet (its first message starts it)."""

    def __init__(self) -> None:
        self._chats: dict[int | None, bool] = {}

    def thinking_for(self, conversation_id: int | None) -> bool:
        return self._chats.get(conversation_id, DEFAULT_THINKING)

    def toggle(self, conversation_id: int | None) -> bool:
        self._chats[conversation_id] = not self.thinking_for(conversation_id)
        return self._chats[conversation_id]

    def started(self, conversation_id: int) -> None:
        """The new chat got its id: the choice made before its first message goes with it."""
        if None in self._chats:
            self._chats[conversation_id] = self._chats.pop(None)


def can_switch(fmt: ChatFormat | None) -> bool:
    return fmt is not None and fmt.kind == "jinja" and has_thinking_switch(fmt.template)


def toggled_words(model_name: str, switchable: bool, thinking: bool) -> str:
    """What the switch's key says: the new state, or why there is none to change."""
    if not switchable:
        return (
            f"{model_name}'s chat template has no thinking switch (enable_thinking): "
            "a reasoning model without one always thinks, and its thoughts are shown folded."
        )
    if thinking:
        return "Thinking on for this chat: the model reasons before it answers (shown folded)."
    return "Thinking off for this chat: the model's template tells it to answer at once."
