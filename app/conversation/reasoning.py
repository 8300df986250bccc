"""The reasoning part of a reply, told from its answer, while it streams and once it is stored.

Reasoning models write their thoughts before the answer, in their template's own markers:
`<think>...</think>` (DeepSeek-R1 distills, QwQ, Qwen3, GLM-4.5), `[THINK]...[/THINK]` (Magistral),
`<|START_THINKING|>...<|END_THINKING|>` (Command A Reasoning), `<seed:think>...</seed:think>` (Seed-OSS),
or gpt-oss's harmony channels
(`<|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...`; llama.cpp
renders `<|channel|>`, `<|message|>` and `<|start|>` but drops `<|end|>`). Some templates open the
block themselves (the prompt ends in `<think>\\n`): the reply then starts inside it, and the app puts
the opening marker back (`OPEN_MARKER`) so that the stored reply says what it is without its prompt.

Only a block at the head of the reply is reasoning: a `<think>` the answer quotes later is text.
The split is a function of the text so far; a marker cut between two pieces waits for the next one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.conversation.templates import ChatFormat
from app.engine.markers import partial_marker

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# every published pair of reasoning markers a reply may open with (the first is the common one)
THINK_PAIRS = (
    (THINK_OPEN, THINK_CLOSE),
    ("[THINK]", "[/THINK]"),  # Magistral
    ("<|START_THINKING|>", "<|END_THINKING|>"),  # Command A Reasoning
    ("<seed:think>", "</seed:think>"),  # Seed-OSS
)
OPEN_MARKER = THINK_OPEN + "\n"  # what the app puts before a reply whose prompt opened the block
CHANNEL, MESSAGE, START, END = "<|channel|>", "<|message|>", "<|start|>", "<|end|>"
_HARMONY_ENDS = (END, START, "<|return|>", "<|call|>")
_LEADS = (*(opening for opening, _ in THINK_PAIRS), CHANNEL)


@dataclass(frozen=True)
class Split:
    reasoning: str  # the thoughts, without their markers
    answer: str  # what the model says to the user
    thinking: bool  # the reply is still inside its reasoning (unclosed so far)
    has_reasoning: bool  # the reply opened a reasoning block (even an empty one)


def split_reply(text: str, final: bool = True) -> Split:
    """`text` (a reply as the model wrote it, or as stored) parted into reasoning and answer. While it
    streams (`final` False), what could still become a marker is held back from both parts."""
    head = text.lstrip()
    if not final and head and any(m.startswith(head) and m != head for m in _LEADS):
        return Split("", "", False, False)  # "<thi": a marker or not, the next piece says
    if not final and not head:
        return Split("", "", False, False)
    for opening, closing in THINK_PAIRS:
        if head.startswith(opening):
            return _think(head[len(opening) :], final, opening, closing)
    if head.startswith(CHANNEL):
        return _harmony(head, final)
    return Split("", text, False, False)


def _think(body: str, final: bool, opening: str = THINK_OPEN, closing: str = THINK_CLOSE) -> Split:
    again = body.lstrip()  # a model that writes `<think>` after its template opened the block
    if again.startswith(opening):
        body = again[len(opening) :]
    elif not final and again and opening.startswith(again):
        return Split("", "", True, True)
    end = body.find(closing)
    if end < 0:
        shown = body if final else body[: len(body) - partial_marker(body, (closing,))]
        return Split(shown.strip(), "", not final, True)
    return Split(body[:end].strip(), body[end + len(closing) :].lstrip(), False, True)


def _harmony(text: str, final: bool) -> Split:
    """Channels one after another: `<|channel|>NAME<|message|>BODY`, each ended by `<|end|>` or the next
    `<|start|>assistant`. The final channel is the answer; analysis (and any other) is reasoning."""
    thoughts: list[str] = []
    at = 0
    while True:
        at = text.find(CHANNEL, at)
        if at < 0:
            break
        header_end = text.find(MESSAGE, at)
        if header_end < 0:  # the channel's name is still being written
            return Split(_joined(thoughts), "", not final, True)
        name = text[at + len(CHANNEL) : header_end].strip()
        body_start = header_end + len(MESSAGE)
        if name.startswith("final"):
            answer = text[body_start:]
            for marker in _HARMONY_ENDS:
                answer = answer.split(marker, 1)[0]
            if not final:
                answer = answer[: len(answer) - partial_marker(answer, _HARMONY_ENDS)]
            return Split(_joined(thoughts), answer.lstrip(), False, True)
        ends = [i for i in (text.find(m, body_start) for m in _HARMONY_ENDS) if i >= 0]
        if not ends:
            body = text[body_start:]
            if not final:
                body = body[: len(body) - partial_marker(body, _HARMONY_ENDS)]
            return Split(_joined([*thoughts, body]), "", not final, True)
        thoughts.append(text[body_start : min(ends)])
        at = min(ends)
    return Split(_joined(thoughts), "", not final, True)


def _joined(parts: list[str]) -> str:
    return "\n\n".join(p.strip() for p in parts if p.strip())


def answer_of(text: str) -> str:
    """The answer alone: what an earlier reply is in a later prompt (as reasoning models' templates
    render history), and what a copy of it means."""
    split = split_reply(text)
    return split.answer.strip() if split.has_reasoning else text


def opened_marker(prompt: str) -> str:
    """The marker (and a newline) the rendered prompt ends with where it opened a reasoning block for the model
    (the template wrote `<think>`, `[THINK]` ...), so that the reply starts in its thoughts; '' otherwise."""
    tail = prompt.rstrip()
    return next((opening + "\n" for opening, _ in THINK_PAIRS if tail.endswith(opening)), "")


def opens_reasoning(prompt: str) -> bool:
    """Whether the rendered prompt ends inside an opened reasoning block (`opened_marker`)."""
    return bool(opened_marker(prompt))


def has_thinking_switch(template: str) -> bool:
    """Whether a chat template reads `enable_thinking` (Qwen3, GLM-4.5, ...): one the chat can turn off."""
    return "enable_thinking" in template


class ReplySplitter:
    """Feeds a streaming reply piece by piece; each `feed` says what is new in the reasoning and in
    the answer since the last call (markers never show, even cut between pieces)."""

    def __init__(self) -> None:
        self.raw = ""
        self._split = Split("", "", False, False)
        self._plain = False  # known to have no reasoning: every piece is answer, nothing to parse

    @property
    def split(self) -> Split:
        return Split("", self.raw, False, False) if self._plain else self._split

    def feed(self, piece: str, final: bool = False) -> tuple[str, str]:
        """(new reasoning, new answer). A part that changes other than by growing (rare: a held-back
        guess proved wrong) comes back whole."""
        self.raw += piece
        if self._plain:
            return "", piece
        before = self._split
        self._split = split_reply(self.raw, final)
        self._plain = not self._split.has_reasoning and bool(self._split.answer)
        return _grown(before.reasoning, self._split.reasoning), _grown(before.answer, self._split.answer)


def _grown(before: str, now: str) -> str:
    return now[len(before) :] if now.startswith(before) else now


def template_switches(template: str, thinking: bool) -> dict[str, bool]:
    """The variables a chat template gets from the chat: `enable_thinking` where it reads one."""
    return {"enable_thinking": thinking} if has_thinking_switch(template) else {}


@dataclass(frozen=True)
class Thought:
    """How long a reply thought and how many of its tokens were thoughts (they count in its speed)."""

    seconds: float
    tokens: int


class ThoughtClock:
    """Follows a streaming reply and notes when its reasoning ends: the time since its first piece,
    and the tokens written by then (the engine's count, the closing marker included)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._splitter = ReplySplitter()
        self._started: float | None = None
        self.thought: Thought | None = None

    def opened(self, marker: str) -> None:
        """The marker the app wrote for the model (its prompt opened the block): no time, no token."""
        self._splitter.feed(marker)

    def saw(self, piece: str, tokens: int) -> None:
        now = self._clock()
        if self._started is None:
            self._started = now
        if self.thought is not None:
            return
        self._splitter.feed(piece)
        split = self._splitter.split
        if split.has_reasoning and not split.thinking:
            self.thought = Thought(now - self._started, tokens)

    def finish(self, tokens: int) -> Thought | None:
        """The reply's thought, or None for a reply without reasoning; one cut short while it was
        still thinking thought for all of its time and tokens."""
        if self.thought is None and self._started is not None:
            split = split_reply(self._splitter.raw)
            if split.has_reasoning:
                self.thought = Thought(self._clock() - self._started, tokens)
        return self.thought


# -- the chat's thinking switch (`enable_thinking`): on, the model reasons before it answers; off, the
# template tells it not to. Kept with each chat's settings (app.conversation.sampling.ChatSampling).

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
