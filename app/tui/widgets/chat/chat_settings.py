"""The open chat's own settings on screen: the line over the conversation that says when a system prompt
or sampling of the chat's own is in force, F4's dialog, and `set_chat_setting` for typed commands.

With no chat open the settings are those the next chat starts with (held here, on the screen); the
system prompt set then is also kept as new chats' default (the settings file), as before.

For other parts of the chat (the slash commands): `screen.set_chat_setting("temp", "0.7")` (names as
app.conversation.sampling.field_name reads them, "system" for the system prompt; a value of "default" unsets)
returns what was done in words, or raises ValueError with what is wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.widgets import Static

from app.conversation.sampling import (
    ChatSampling,
    describe_temperature,
    field_name,
    model_defaults,
    parse,
    reply_sampling,
    user_defaults,
)
from app.engine.types import GenerationParams

if TYPE_CHECKING:
    from app.tui.widgets.chat.view import ChatView


PROMPT_LABEL, SAMPLING_LABEL, BETWEEN = "System prompt: ", "Sampling: ", "  ·  "
PROMPT_KEPT = 16  # columns of the system prompt kept at least beside the sampling, else each has a row


def settings_words(system_prompt: str, changed: list[str], width: int) -> Text:
    """The chat's own settings in `width` columns: one row where they fit; else the system prompt shortened
    inside its quotes ("…" before the closing one) and the sampling's last values counted ("+2 more"),
    on one row while the prompt keeps a few words and a value shows, else one row each. Never a label
    left without its values."""
    prompt = " ".join(system_prompt.split())
    whole = _line(prompt, ", ".join(changed))
    if whole.cell_len <= width:
        return whole
    if prompt and changed:
        fixed = len(PROMPT_LABEL) + 2 + len(BETWEEN) + len(SAMPLING_LABEL)
        values = _values(changed, width - fixed - min(PROMPT_KEPT, Text(prompt).cell_len))
        if values is not None:
            return _line(_shortened(prompt, width - fixed - Text(values).cell_len), values)
        rows = _line(_shortened(prompt, width - len(PROMPT_LABEL) - 2), "")
        rows.append("\n")
        rows.append_text(_line("", _values(changed, width - len(SAMPLING_LABEL)) or f"{len(changed)} values"))
        return rows
    if prompt:
        return _line(_shortened(prompt, width - len(PROMPT_LABEL) - 2), "")
    return _line("", _values(changed, width - len(SAMPLING_LABEL)) or f"{len(changed)} values")


def _line(prompt: str, values: str) -> Text:
    line = Text(no_wrap=True)
    if prompt:
        line.append(PROMPT_LABEL, style="bold")
        line.append(f"“{prompt}”")
    if values:
        if line:
            line.append(BETWEEN)
        line.append(SAMPLING_LABEL, style="bold")
        line.append(values)
    return line


def _shortened(prompt: str, room: int) -> str:
    """The prompt in `room` columns, its end given way to "…"."""
    text = Text(prompt)
    text.truncate(max(room, 1), overflow="ellipsis")
    return text.plain


def _values(changed: list[str], room: int) -> str | None:
    """As many of the values as fit in `room` columns, the rest counted ("temp 1, top-p 0.98 +3 more");
    None where not even one fits."""
    for shown in range(len(changed), 0, -1):
        rest = len(changed) - shown
        words = ", ".join(changed[:shown]) + (f" +{rest} more" if rest else "")
        if Text(words).cell_len <= room:
            return words
    return None


class SettingsLine(Static):
    """A line (two where one cannot say both), shown only when the chat has a system prompt or sampling of
    its own, fitted to its width (fitted again when the width changes)."""

    DEFAULT_CSS = """
    SettingsLine { height: auto; max-height: 2; padding: 0 1; color: $text-muted; display: none; }
    SettingsLine.-shown { display: block; }
    """

    _prompt = ""
    _changed: tuple[str, ...] = ()

    def show_settings(self, system_prompt: str, sampling: ChatSampling) -> None:
        self._prompt, self._changed = system_prompt.strip(), tuple(sampling.changed())
        self.set_class(bool(self._prompt or self._changed), "-shown")
        self._fit(self.content_region.width or self.app.size.width)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(self.content_region.width or event.size.width)

    def _fit(self, width: int) -> None:
        self.update(settings_words(self._prompt, list(self._changed), width))


def sampling_of(screen: ChatView) -> ChatSampling:
    """The open chat's sampling (with none open: the next chat's)."""
    if screen.conversation is None:
        return screen.next_sampling
    return ChatSampling.from_json(screen.conversation.settings)


def system_prompt_of(screen: ChatView) -> str:
    if screen.conversation is not None:
        return screen.conversation.system_prompt
    return screen.services.settings.system_prompt


def params_for(screen: ChatView) -> GenerationParams:
    """What the next reply of the open chat is sampled with (app.conversation.sampling.reply_sampling: the chat's
    own, else the user's defaults, else the loaded model's, else its kind's)."""
    model = screen.services.session.model
    assert model is not None, "a reply is asked for only with a model loaded"
    settings = screen.services.settings
    return reply_sampling(
        ChatSampling(),
        sampling_of(screen),
        user_defaults(settings.temperature, settings.max_tokens),
        model.anatomy.metadata,
        model.fmt,
    )


def status_words(screen: ChatView) -> tuple[str, int]:
    """For the status line: the temperature in words, saying whose it is, and the reply length."""
    model = screen.services.session.model
    assert model is not None
    params = params_for(screen)
    if sampling_of(screen).temperature is not None:
        whose = ""
    elif screen.services.settings.temperature is not None:
        whose = " (your default)"
    elif model_defaults(model.anatomy.metadata).temperature is not None:
        whose = " (the model's)"
    else:
        return describe_temperature(None, model.fmt), params.max_tokens
    return ("greedy" if params.temperature <= 0 else f"temp {params.temperature:g}") + whose, params.max_tokens


def thinking_of(screen: ChatView) -> bool:
    """The chat's thinking switch (app.conversation.reasoning): its own, else on."""
    from app.conversation.reasoning import DEFAULT_THINKING

    own = sampling_of(screen).thinking
    return DEFAULT_THINKING if own is None else own


def toggle_thinking(screen: ChatView) -> bool:
    """Turn the chat's thinking switch over and keep it with the chat; the new state."""
    on = not thinking_of(screen)
    keep(screen, system_prompt_of(screen), sampling_of(screen).set("thinking", on))
    return on


def keep(screen: ChatView, system_prompt: str, sampling: ChatSampling) -> None:
    """Save the chat's settings (with none open: the next chat's) and show them."""
    services = screen.services
    if screen.conversation is None:
        screen.next_sampling = sampling
        services.settings.system_prompt = system_prompt
        services.save_settings()
    else:
        conv = screen.conversation
        services.store.set_system_prompt(conv.id, system_prompt)
        services.store.set_settings(conv.id, sampling.to_json())
        conv.system_prompt, conv.settings = system_prompt, sampling.to_json()
    screen.update_context_line()


def started(screen: ChatView) -> None:
    """A chat was just started: the settings chosen for it before its first message go with it."""
    if screen.conversation is not None and screen.next_sampling != ChatSampling():
        screen.services.store.set_settings(screen.conversation.id, screen.next_sampling.to_json())
        screen.conversation.settings = screen.next_sampling.to_json()
        screen.next_sampling = screen.services.options.sampling  # the command line's, for every chat it starts


def set_chat_setting(screen: ChatView, name: str, value: str) -> str:
    """One setting of the open chat from typed words ("temp", "0.7"); the words of what was done."""
    if name.strip().lower() in ("system", "system_prompt", "system-prompt"):
        keep(screen, value.strip(), sampling_of(screen))
        return "System prompt set for this chat." if value.strip() else "System prompt cleared for this chat."
    key = field_name(name)
    parsed = parse(key, value)
    keep(screen, system_prompt_of(screen), sampling_of(screen).set(key, parsed))
    words = key.replace("_", " ")
    return f"{words} back to the model's own." if parsed is None else f"{words} {value.strip()} for this chat."


def open_dialog(screen: ChatView) -> None:
    from app.tui.screens.dialogs import ChatSettings, ChatSettingsDialog

    model = screen.services.session.model
    own = model_defaults(model.anatomy.metadata).changed() if model is not None else []
    note = f"{model.name} carries its own: {', '.join(own)}." if model is not None and own else ""

    def done(result: ChatSettings | None) -> None:
        if result is not None:
            keep(screen, result.system_prompt, result.sampling)
            screen.app.notify(
                "Chat settings saved with the chat." if screen.conversation else "Saved for the next chat.", timeout=2
            )

    scope = "this chat" if screen.conversation is not None else "the next chat"
    current = ChatSettings(system_prompt_of(screen), sampling_of(screen))
    screen.app.push_screen(ChatSettingsDialog(current, scope, note), done)
