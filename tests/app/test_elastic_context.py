"""A KV cache that grows with the conversation: small at load, larger when a prompt needs it, back
to small for a new chat; the replies are the ones a fixed context gives, token for token.

Real llama.cpp in the engine process, through the app's own reply function.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.conversation.reply import OK, write_reply
from app.conversation.templates import ChatMessage
from app.devices import probe_devices
from app.engine import GenerationParams
from app.engine.planned_actual import compare_load
from app.session import Growth, ModelSession
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.elastic import START_CTX
from planner.fit import evaluate
from planner.gguf import read_gguf

pytestmark = pytest.mark.llama

GREEDY = GenerationParams(max_tokens=24, temperature=0.0)


def _notes(n: int, words: int) -> str:
    """A long, deterministic user message (a pasted document)."""
    return " ".join(f"Note {n}.{i}: the parcel number {i * 7919 % 1000} went to shelf {i % 13}." for i in range(words))


def _conversation(
    path: str, max_ctx: int, elastic: bool, turns: int, words: int
) -> tuple[list[str], list[Growth], list[int], ModelSession]:
    devices = probe_devices(cpu_only=True)
    anatomy = load_anatomy(read_gguf(path))
    fit = evaluate(anatomy, LoadConfig(n_ctx=max_ctx, flash_attn=True), [], devices.host)
    session = ModelSession(elastic=elastic)
    session.load(path, anatomy, fit, devices)
    history: list[ChatMessage] = []
    replies: list[str] = []
    growths: list[Growth] = []
    sizes: list[int] = []
    for n in range(turns):
        history.append(ChatMessage("user", _notes(n, words) + " Which shelf did parcel 7 go to?"))
        outcome = write_reply(
            session,
            None,
            0,
            list(history),
            "",
            GREEDY,
            threading.Event(),
            on_fitted=lambda b: None,
            on_piece=lambda p: None,
            on_growth=growths.append,
        )
        assert outcome.kind == OK, outcome.error
        replies.append(outcome.text)
        history.append(ChatMessage("assistant", outcome.text))
        sizes.append(session.model.n_ctx)  # type: ignore[union-attr]
    return replies, growths, sizes, session


# steps to 8,192: 4,096 -> 6,144 -> 8,192; the tiny model's vocabulary splits text finely
@pytest.mark.parametrize("name, words", [("demo", 90), ("granitehybrid", 25)])
def test_a_growing_context_gives_the_replies_of_a_fixed_one(
    name: str, words: int, zoo: dict[str, Path], gemma_path: Path
) -> None:
    path = str(gemma_path if name == "demo" else zoo[name])
    grown, growths, sizes, session = _conversation(path, 8192, True, turns=4, words=words)
    try:
        assert sizes[0] == START_CTX and sizes[-1] > sizes[0]
        steps = [g for g in growths if not g.error]
        assert len(steps) >= 2, sizes  # crossed at least two growth steps
        assert all(g.after > g.before for g in steps)
        kv = session.model.report.measurements  # type: ignore[union-attr]
        assert sum(kv.kv.values()) > 0
    finally:
        session.close()
    fixed, none, fixed_sizes, session = _conversation(path, 8192, False, turns=4, words=words)
    session.close()
    assert not none and set(fixed_sizes) == {8192}
    assert grown == fixed  # token for token, at temperature 0


def test_load_commits_the_start_size_and_a_new_chat_gives_memory_back(gemma_path: Path) -> None:
    devices = probe_devices(cpu_only=True)
    anatomy = load_anatomy(read_gguf(gemma_path))
    fit = evaluate(anatomy, LoadConfig(n_ctx=32768, flash_attn=True), [], devices.host)
    session = ModelSession(elastic=True)
    try:
        model = session.load(str(gemma_path), anatomy, fit, devices)
        assert model.n_ctx == START_CTX and model.max_ctx == 32768
        committed = model.report.measurements
        kv_now = sum(committed.kv.values()) + sum(committed.kv_swa.values())
        kv_max = sum(b.bytes for b in model.plan.buffers if b.kind in ("kv", "kv_swa"))
        assert kv_now < kv_max / 3
        # the plan for what is allocated now matches llama.cpp, buffer by buffer
        assert all(row.matches for row in compare_load(model.now, model.report) if row.kind != "process")
        growth = session.grow_for(20000)
        assert growth is not None and growth.after == 24576 and not growth.error
        assert model.n_ctx == 24576 and session.telemetry.kv_allocated > kv_now  # type: ignore[union-attr]
        assert all(row.matches for row in compare_load(model.now, model.report) if row.kind != "process")
        shrunk = session.shrink()
        assert shrunk is not None and shrunk.after == START_CTX and model.n_ctx == START_CTX
        assert session.telemetry.kv_allocated == kv_now  # type: ignore[union-attr]
        assert session.engine.kv_cells_used() == 0
    finally:
        session.close()
