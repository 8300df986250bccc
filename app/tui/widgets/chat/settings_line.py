"""The line over the conversation that says when a system prompt or sampling of the chat's own is in
force (the chat's controller, app/tui/screens/chat_controller.py, holds them), fitted to its width."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.widgets import Static

if TYPE_CHECKING:
    from app.conversation.sampling import ChatSampling

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
