"""The app with the real engine and the real demo model (Gemma 3 270M): load, stream, stop, dashboard."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Settings
from app.tui.messages import ReplyPiece
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dashboard import DashboardScreen
from app.tui.widgets.buffers import BufferTable
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.dashboard import Dashboard
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.time_plot import TimePlot
from tests.support.tui_helpers import make_app, model_loaded, reply_done, send_and_wait, wait_for

pytestmark = pytest.mark.llama


async def ask(app, pilot, text: str, timeout: float = 60) -> MessageView:
    await send_and_wait(app, pilot, text, timeout)
    return list(app.screen.query(MessageView))[-1]


async def test_demo_model_loads_answers_and_the_dashboard_shows_kv_grow(gemma_path: Path) -> None:
    # the whole context at load, so that planned, dry run and allocated are for one configuration
    settings = Settings(scan_known_caches=False, temperature=0.0, max_tokens=48, elastic_context=False)
    app = make_app(None, model=str(gemma_path), settings=settings, real_engine=True)
    pieces: list[str] = []

    def hook(message: object) -> None:
        if isinstance(message, ReplyPiece):
            pieces.append(message.text)

    async with app.run_test(size=(160, 45), message_hook=hook) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=60)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        model = app.session.model
        assert model is not None and model.fmt.kind == "transcript"  # a base model without a template
        box = chat.query_one(ChatInput)
        box.focus()
        await pilot.press(*"What is the capital of France?", "enter")
        await pilot.pause(0.05)
        await wait_for(pilot, reply_done(app), timeout=60)
        await pilot.pause(0.05)
        first = list(chat.query(MessageView))[-1]
        assert "Paris" in first.text
        assert len(pieces) >= 2  # streamed, not delivered at once
        telemetry = app.session.telemetry
        assert telemetry is not None and telemetry.running
        await wait_for(pilot, lambda: telemetry.latest() is not None and telemetry.latest().kv_cells_used > 0)
        kv_before = telemetry.latest().kv_used  # type: ignore[union-attr]

        second = await ask(app, pilot, "What is the capital of Germany?")
        assert "Berlin" in second.text
        await wait_for(pilot, lambda: telemetry.latest().kv_used > kv_before)  # type: ignore[union-attr]
        kv_plot = chat.query_one("#p-kv", TimePlot)
        # the dashboard draws the new sample at its next refresh (a fixed pause was too short on a busy CI)
        await wait_for(pilot, lambda: bool(kv_plot.lines) and kv_plot.lines[0].values[-1:] > [kv_before])
        in_use, committed, planned = kv_plot.lines
        assert in_use.values[-1] > kv_before and max(in_use.values) == in_use.values[-1]
        allocated = sum(model.report.measurements.kv.values()) + sum(model.report.measurements.kv_swa.values())
        assert committed.values[-1] == allocated == planned.values[-1]  # the whole context, as planned

        # saved as sent and completed
        conv = app.store.conversation(chat.conversation.id)  # type: ignore[union-attr]
        assert [m.role for m in conv.messages] == ["user", "assistant", "user", "assistant"]
        assert all(m.state == "complete" for m in conv.messages)

        # planned vs actual: every buffer of this CPU plan matches what llama.cpp logged
        await pilot.press("f3")
        await pilot.pause(0.2)
        dash = app.screen
        assert isinstance(dash, DashboardScreen)
        table = dash.query_one(BufferTable)
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count - 1)]
        diffs = [row[3] for row in rows]
        assert diffs and all(d == "=" for d in diffs), diffs
        # llama.cpp's dry run before the load gave the same figures (weights: it reads none)
        for name, planned_size, _actual, _diff, dry in rows:
            assert dry == "-" if name.endswith("weights") else dry == f"{planned_size} ✓", (name, dry)
    # Esc on a long reply with the real engine: test_engine_twins (a model that never ends; this one's greedy
    # replies end in some 26 tokens, under a tenth of a second on a fast machine, before an Esc can arrive)


async def test_the_runway_follows_a_chat_with_the_demo_and_jumps_when_the_context_grows(gemma_path: Path) -> None:
    # the context grows with the chat (the default): 4,096 tokens at load, the plan's maximum reserved
    settings = Settings(scan_known_caches=False, temperature=0.0, max_tokens=16)
    app = make_app(None, model=str(gemma_path), settings=settings, real_engine=True)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=120)
        model = app.session.model
        assert model is not None and model.n_ctx == 4_096 < model.max_ctx
        board = app.screen.query_one("#dashboard", Dashboard)
        engine = app.session.engine

        async def runway_now():
            cells = engine.kv_cells_used()
            await wait_for(
                pilot,
                lambda: (
                    getattr(board, "runway", None) is not None
                    and board.runway.used == cells
                    and board.runway.committed == model.n_ctx
                ),
                timeout=30,
            )
            return board.runway

        await ask(app, pilot, "What is the capital of France?")
        first = await runway_now()
        await ask(app, pilot, "What is the capital of Germany?")
        second = await runway_now()
        assert first.committed == second.committed == 4_096 and second.next_step == 8_192
        assert 0 < first.used < second.used and first.until_growth > second.until_growth > 3_000
        assert first.until_full > second.until_full and second.per_turn is not None and second.per_turn > 0
        said = str(board.query_one("#runway").render())
        assert "until the context grows (to 8,192)" in said and "tokens a turn" in said

        # a long prompt: past 4,096 tokens the context grows, and the runway with it
        await ask(app, pilot, "apple " * 4_100 + "\nHow many apples?", timeout=300)  # seconds on 2 busy cores
        third = await runway_now()
        assert third.used > 4_096 and third.committed == 8_192 == model.n_ctx
        assert third.until_growth == 8_192 - third.used and third.until_full == model.max_ctx - third.used
        assert third.per_turn is not None and third.per_turn > second.per_turn


async def test_the_context_count_during_a_chat_is_what_llama_cpp_holds_and_what_reopening_counts(
    gemma_path: Path,
) -> None:
    settings = Settings(scan_known_caches=False, temperature=0.0, max_tokens=24)
    app = make_app(None, model=str(gemma_path), settings=settings, real_engine=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=60)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        engine = app.session.engine
        for question in ("What is the capital of France?", "And of Spain?"):
            await ask(app, pilot, question)
            stats = engine.last_stats
            assert stats is not None and stats.generated_tokens > 0
            held = engine.kv_cells_used()
            assert held == stats.prompt_tokens + stats.generated_tokens  # the reply is in the cache
            assert chat.context_tokens == held
            assert f"context {held:,} /" in str(chat.query_one("#context-line").render())
        conversation = chat.conversation
        assert conversation is not None
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: chat.context_tokens == 0)
        await chat.open_conversation(conversation.id)
        await wait_for(pilot, lambda: chat.context_tokens > 0)
        assert chat.context_tokens == held  # reopening counts the same chat the same
