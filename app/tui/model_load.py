"""Loading the model list's selection (Enter, Ctrl+L, the Load button), beside deleting it
(app/tui/model_delete.py): a model that is not for chat is refused, saying why; a plan that does not fit
is loaded only once the user says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.tui.dialog_asks import ConfirmAsked

if TYPE_CHECKING:
    from textual.message_pump import MessagePump

    from planner.fit import FitResult
    from planner.model import ModelAnatomy


def refused_for_chat(app: Any, name: str, anatomy: ModelAnatomy) -> bool:
    """Whether the model `name` is not one to chat with (an embedding model, say); if so, the user is told."""
    from planner.archs import not_for_chat

    why_not = not_for_chat(anatomy.architecture)
    if why_not:
        app.notify(
            f"{name} is {why_not}: vramchat cannot chat with it. Its memory plan is shown here and by vramchat --plan.",
            title="Not a chat model",
            severity="error",
            timeout=10,
        )
    return bool(why_not)


def load_or_ask(screen: MessagePump, result: FitResult, load: Callable[[], object]) -> None:
    """`load()` at once where the plan fits; else once the user, asked on `screen`, says to load anyway."""
    if result.plan.fits:
        load()
        return
    over = "; ".join(result.reasons[1:3]) or "the plan needs more memory than is free"

    def load_if_confirmed(yes: bool | None) -> None:
        if yes:
            load()

    text = (
        f"This configuration does not fit: {over}.\n\nllama.cpp may fail to allocate, or the "
        "system may start swapping. Load anyway?"
    )
    screen.post_message(ConfirmAsked("Load anyway?", text, load_if_confirmed, confirm="Load anyway", danger=True))
