"""A reply's reasoning, folded above its answer: "Thought for 12 s, 340 tokens" (Enter or a click unfolds
it); while the model still thinks, "Thinking… 5 s", counted up each second."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual.timer import Timer
from textual.widgets import Collapsible, Static

from app.conversation.reasoning import Thought, split_reply
from app.terminal_text import terminal_safe

if TYPE_CHECKING:
    from app.store import StoredMessage

TICK_SECONDS = 1.0


def thinking_title(seconds: float) -> str:
    return f"Thinking… {seconds:.0f} s"


def thought_title(thought: Thought | None, seconds: float = 0.0) -> str:
    """The fold's words once the thought ended: the engine's figures, else the time seen on screen."""
    if thought is None:
        return f"Thought for {seconds:.0f} s"
    return f"Thought for {thought.seconds:.0f} s, {thought.tokens:,} tokens"


def stored_thought(reasoning: str, answer: str, tokens: int, tokens_per_second: float) -> str:
    """The fold's words for a reply read back from the store, which keeps the reply's tokens and speed
    but not where its thought ended: the thought's share of them, by its share of the text."""
    if not tokens:
        return "Thought"
    share = len(reasoning) / max(len(reasoning) + len(answer), 1)
    thought_tokens = round(tokens * share)
    if tokens_per_second <= 0:
        return f"Thought, about {thought_tokens:,} tokens"
    return f"Thought for about {thought_tokens / tokens_per_second:.0f} s, {thought_tokens:,} tokens"


class ThoughtFold(Collapsible):
    """The reasoning, folded. `think()` starts the live count while it streams, `stop()` ends it."""

    DEFAULT_CSS = """
    ThoughtFold { background: transparent; border-top: none; padding: 0; margin: 0 0 1 0; }
    ThoughtFold > Contents { padding: 0 0 0 2; }
    ThoughtFold .thought-body { color: $text-muted; }
    """

    def __init__(self, reasoning: str, title: str) -> None:
        self.reasoning = reasoning
        self._body = Static(terminal_safe(reasoning, multiline=True), classes="thought-body", markup=False)
        super().__init__(self._body, title=title, collapsed=True, classes="thought")
        self._started = 0.0
        self._ticker: Timer | None = None

    def add(self, text: str) -> None:
        self.reasoning += text
        if not self.collapsed:  # folded, it is drawn when unfolded
            self._body.update(terminal_safe(self.reasoning, multiline=True))

    def set_reasoning(self, text: str) -> None:
        self.reasoning = text
        self._body.update(terminal_safe(text, multiline=True))

    def on_collapsible_expanded(self) -> None:
        self._body.update(terminal_safe(self.reasoning, multiline=True))

    def think(self) -> None:
        self._started = time.monotonic()
        self.title = thinking_title(0)
        self._ticker = self.set_interval(TICK_SECONDS, self._tick)

    def _tick(self) -> None:
        self.title = thinking_title(time.monotonic() - self._started)

    @property
    def ticking(self) -> bool:
        return self._ticker is not None

    def stop(self, thought: Thought | None = None) -> None:
        """The thought ended: its time as seen here, until the engine's `thought` says better."""
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
            self.title = thought_title(thought, time.monotonic() - self._started)
        elif thought is not None:
            self.title = thought_title(thought)


def fold_words(m: StoredMessage) -> str:
    """The fold's words for a stored reply ('' for a message without reasoning)."""
    if m.role != "assistant":
        return ""
    split = split_reply(m.content)
    return stored_thought(split.reasoning, split.answer, m.tokens, m.tokens_per_second) if split.has_reasoning else ""
