"""The status line under the conversation: the context in use first, then sampling, then what is
least needed (the format, the growth limit); the line drops those first when short of room."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.conversation.sampling import describe_temperature
from app.tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from app.conversation.templates import ChatFormat
    from app.tui.services import Services


def format_words(fmt: ChatFormat) -> str:
    """How the chat is put to the model, in words ("gguf format" named the file type, not the template)."""
    if fmt.kind == "jinja":
        return "the model's chat template"
    if fmt.kind == "transcript":
        return "a Q/A transcript"
    return f"the {fmt.name} format"


class ContextLine(StatusLine):
    def __init__(self, services: Services, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.services = services

    def show_context(
        self, used: int, system_prompt: str | None, loading: bool, sampling: tuple[str, int] | None = None
    ) -> None:
        """`used` tokens of the context taken by the open chat; `system_prompt` its own (None: no chat
        is open, the settings' one applies); `sampling`: its temperature in words and its reply length."""
        app = self.services
        model = app.session.model if app.session_started else None
        if model is None:
            self.show([(0, "no model loaded"), (1, "F2 opens the model list")])
            return
        if not loading and not app.session.engine.loaded:
            self.show([(0, "the engine stopped"), (1, "F5 reloads"), (2, "F2 the model list")])
            return
        settings = app.settings
        share = used / model.n_ctx if model.n_ctx else 0
        system = system_prompt if system_prompt is not None else settings.system_prompt
        serving = getattr(getattr(self.app, "serving", None), "url", "")  # where the app serves the model (/serve)
        self.show(
            [
                (0, f"context {used:,} / {model.n_ctx:,} ({share:.0%})"),
                (1, f"serving {serving}" if serving else ""),
                (3, f"grows to {model.max_ctx:,}" if model.n_ctx < model.max_ctx else ""),
                (1, describe_temperature(None, model.fmt) if sampling is None else sampling[0]),
                (2, f"max {sampling[1] if sampling else settings.max_tokens} tokens"),
                (4, "system prompt" if system else ""),
                (5, format_words(model.fmt)),
            ]
        )
