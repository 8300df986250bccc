"""The chat's thinking switch, for models whose chat template reads `enable_thinking` (Qwen3, GLM-4.5,
...): on, the model reasons before it answers; off, the template tells it not to.

Kept with each chat's settings in the store, on by default (app.tui.widgets.chat.chat_settings:
`thinking_of`, `toggle_thinking`)."""

from __future__ import annotations

from app.engine.templates import ChatFormat
from app.reasoning import has_thinking_switch

DEFAULT_THINKING = True


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
