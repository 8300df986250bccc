"""The status line under the conversation: the context in use first, then sampling, then what is
least needed (the format, the growth limit); the line drops those first when short of room. It also
says in a toast what happens to the context: a prompt that fills it (old turns left out), a chat
template stopped, a context that could not grow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.conversation.sampling import describe_temperature
from app.engine.failure import first_line
from app.tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from app.conversation.templates import ChatFormat
    from app.session import Growth
    from app.tui.messages import PromptFitted
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
        self._notes_said: set[str] = set()  # a prompt's notes said once (a template stopped)

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

    def tell_fitted(self, fitted: PromptFitted) -> None:
        """A prompt was fitted: a chat template stopped (said once), old turns left out, or the context filling up."""
        notify = self.app.notify
        if fitted.note and fitted.note not in self._notes_said:
            self._notes_said.add(fitted.note)
            notify(fitted.note, title="Chat template stopped", severity="warning", timeout=12)
        if fitted.dropped:
            notify(
                f"The conversation is nearly as long as the context ({fitted.n_ctx:,} tokens): the "
                f"oldest {fitted.dropped} message{'s' if fitted.dropped != 1 else ''} "
                "were left out of the prompt; the system prompt is kept.",
                title="Context nearly full",
                severity="warning",
                timeout=8,
            )
        elif fitted.near_limit:
            notify(
                f"This conversation uses {fitted.tokens:,} of {fitted.n_ctx:,} tokens: the "
                "oldest turns will soon be left out of the prompt.",
                title="Context filling up",
                severity="warning",
                timeout=6,
            )

    def tell_resized(self, growth: Growth) -> None:
        """The context was resized, or could not be (then the oldest turns are left out instead)."""
        error = growth.error
        if error and not growth.after:
            self.app.notify(first_line(error), title="The context could not be resized", severity="warning")
        elif error:
            self.app.notify(
                f"The context could not grow beyond {growth.after:,} tokens: another program may "
                "have taken the memory. The oldest turns are left out of the prompt instead.\n"
                f"{first_line(error)}",
                title="Context kept",
                severity="warning",
                timeout=10,
            )
