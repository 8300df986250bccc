"""The reasoning of a reply told from its answer, on replies recorded from real families, whole and
streamed in pieces cut anywhere (a marker split between two pieces never shows)."""

from __future__ import annotations

import itertools
import random

import pytest

from app.conversation.prompt import to_messages
from app.conversation.reasoning import (
    OPEN_MARKER,
    ReplySplitter,
    ThoughtClock,
    answer_of,
    opens_reasoning,
    split_reply,
    template_switches,
)
from app.conversation.templates import ChatFormat, ChatMessage, render
from app.store import StoredMessage
from tests.support.thinking import RECORDED, THINKING_CHATML

MARKER_BITS = ("<think", "think>", "<|", "|>")

IDS = [family for family, *_ in RECORDED]


@pytest.mark.parametrize("family, raw, reasoning, answer", RECORDED, ids=IDS)
def test_a_recorded_reply_parts_into_reasoning_and_answer(family: str, raw: str, reasoning: str, answer: str) -> None:
    split = split_reply(raw)
    assert (split.reasoning, split.answer.strip()) == (reasoning, answer)
    assert not split.thinking
    assert answer_of(raw).strip() == answer


def _stream(raw: str, cuts: list[int]) -> tuple[str, str, list[str]]:
    splitter = ReplySplitter()
    reasoning, answer, shown = "", "", []
    bounds = [0, *sorted(cuts), len(raw)]
    pieces = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    for i, piece in enumerate([*pieces, ""]):
        new_reasoning, new_answer = splitter.feed(piece, final=i == len(pieces))
        # each part only grows: what was shown is never taken back
        assert splitter.split.reasoning.startswith(reasoning) and splitter.split.answer.startswith(answer)
        reasoning, answer = reasoning + new_reasoning, answer + new_answer
        shown += [new_reasoning, new_answer]
    return reasoning, answer, shown


@pytest.mark.parametrize("family, raw, reasoning, answer", RECORDED, ids=IDS)
def test_a_streamed_reply_parts_alike_wherever_its_pieces_are_cut(
    family: str, raw: str, reasoning: str, answer: str
) -> None:
    rng = random.Random(family)
    cuttings = [[i] for i in range(1, len(raw))]  # every two-piece cut
    cuttings += [list(range(1, len(raw)))]  # a character at a time
    cuttings += [rng.sample(range(1, len(raw)), k=min(len(raw) - 1, rng.randint(2, 12))) for _ in range(200)]
    quotes_tags = not reasoning and "<think>" in answer
    for cuts in cuttings:
        streamed_reasoning, streamed_answer, shown = _stream(raw, cuts)
        assert streamed_reasoning == reasoning
        assert streamed_answer.strip() == answer
        if not quotes_tags:
            assert not any(bit in piece for piece in shown for bit in MARKER_BITS), (cuts, shown)


def test_while_it_thinks_the_reply_says_so_and_shows_no_answer() -> None:
    splitter = ReplySplitter()
    splitter.feed(OPEN_MARKER + "Let me count the letters: s, t, r")
    assert splitter.split.thinking and splitter.split.answer == ""
    splitter.feed("</th")  # the close marker, cut: not shown, still thinking
    assert splitter.split.reasoning == "Let me count the letters: s, t, r" and splitter.split.thinking
    splitter.feed("ink>\n\nThree.")
    assert not splitter.split.thinking and splitter.split.answer == "Three."


def test_a_reply_cut_short_while_thinking_is_all_reasoning() -> None:
    split = split_reply(OPEN_MARKER + "Hmm, the user wants")
    assert split.has_reasoning and split.reasoning == "Hmm, the user wants" and split.answer == ""
    assert answer_of(OPEN_MARKER + "Hmm, the user wants") == ""


def test_the_prompt_a_thinking_template_opens_is_recognised() -> None:
    fmt = ChatFormat("gguf", "jinja", THINKING_CHATML)
    turns = [ChatMessage("user", "Hi")]
    on = render(fmt, turns, switches=template_switches(THINKING_CHATML, True))
    off = render(fmt, turns, switches=template_switches(THINKING_CHATML, False))
    assert on.endswith("<|im_start|>assistant\n<think>\n") and opens_reasoning(on)
    assert off.endswith("<think>\n\n</think>\n\n") and not opens_reasoning(off)
    assert template_switches("{{ messages }}", False) == {}  # no switch in the template: nothing passed


def test_earlier_replies_reach_the_prompt_without_their_reasoning() -> None:
    stored = [
        StoredMessage(1, 1, "user", "What is 7 times 8?"),
        StoredMessage(2, 1, "assistant", RECORDED[2][1]),
        StoredMessage(3, 1, "user", "And 9 times 9?"),
    ]
    turns = to_messages(stored)
    assert turns[1] == ChatMessage("assistant", RECORDED[2][3])
    assert "double-check" not in render(ChatFormat("gguf", "jinja", THINKING_CHATML), turns)


def test_the_clock_notes_when_the_thought_ended_and_its_tokens() -> None:
    now = [100.0]
    clock = ThoughtClock(lambda: now[0])
    clock.opened(OPEN_MARKER)
    for tokens, piece in enumerate(["Let", " me", " see", ".", "</think>", "\n\nYes", "."], start=1):
        clock.saw(piece, tokens)
        now[0] += 0.5
    thought = clock.finish(7)
    assert thought is not None and thought.tokens == 5 and thought.seconds == pytest.approx(2.0)
    plain = ThoughtClock(lambda: now[0])
    plain.saw("Hello", 1)
    assert plain.finish(1) is None


def test_a_model_that_opens_the_block_its_template_opened_shows_no_marker() -> None:
    raw = OPEN_MARKER + RECORDED[0][1]  # Qwen3 writing `<think>` after a template that wrote it
    assert split_reply(raw).reasoning == RECORDED[0][2]
    for cut in range(1, len(raw)):
        streamed_reasoning, streamed_answer, shown = _stream(raw, [cut])
        assert streamed_reasoning == RECORDED[0][2] and streamed_answer.strip() == RECORDED[0][3]
        assert not any(bit in piece for piece in shown for bit in MARKER_BITS)
