"""The memory dashboard in the app: the runway through a scripted conversation, both lines of a
plot drawn, nothing cut from 80 to 200 columns, plan receipts kept, shown and exported.

Fake engine (ElasticFakeEngine: one token a character, a context that grows 4,096 -> 6,144 ->
8,192); the same paths with the real engine and the demo model are in test_tui_real.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.settings import Settings
from app.telemetry.runway import Runway, about
from app.tui.screens.dashboard import DashboardScreen
from app.tui.screens.receipt import ReceiptScreen
from app.tui.widgets.buffers import BufferTable
from app.tui.widgets.dashboard import Dashboard
from app.tui.widgets.memory_bar import MemoryBar
from app.tui.widgets.time_plot import SeriesPlot, TimePlot
from tests.support.fake_engine import ElasticFakeEngine
from tests.support.tui_helpers import (
    make_app,
    open_chat,
    send_and_wait,
    wait_for,
)

TIME_LABEL = re.compile(r"^(-\d+[sm]|now)$")
BYTES_LABEL = re.compile(r"^(0|\d+(\.\d+)? (KiB|MiB|GiB))$")


async def runway_after(app, pilot, board: Dashboard) -> Runway:
    """The runway once the dashboard has drawn the engine's cells as they are now."""
    engine = app.session.engine
    await wait_for(
        pilot,
        lambda: (
            getattr(board, "runway", None) is not None
            and board.runway.used == engine.kv_cells_used()
            and board.runway.committed == app.session.model.n_ctx
        ),
    )
    return board.runway


async def test_the_runway_falls_as_tokens_are_used_and_jumps_when_the_context_grows(shelf: Path) -> None:
    engine = ElasticFakeEngine(reply="ok then")
    app = make_app(shelf, engine, settings=Settings(scan_known_caches=False, max_tokens=64))
    async with app.run_test(size=(160, 45)) as pilot:
        await open_chat(app, pilot)
        board = app.screen.query_one("#dashboard", Dashboard)
        seen: list[Runway] = []
        for text in ("a" * 1_000, "b" * 1_000, "c" * 2_200):
            await send_and_wait(app, pilot, text)
            seen.append(await runway_after(app, pilot, board))
        first, second, third = seen
        # each turn takes its tokens off the runway, before the context grows and before it is full
        assert first.committed == second.committed == 4_096 and third.committed == 6_144
        assert first.until_growth > second.until_growth > 0 and first.until_full > second.until_full > third.until_full
        # the third turn went past the context of 4,096: it grew, and the runway to the next growth
        # jumped from nothing left at 4,096 to what 6,144 leaves
        assert third.used > second.committed and third.until_growth == 6_144 - third.used > 1_500
        assert third.next_step == 8_192 and third.until_full == 8_192 - third.used
        # the pace: the tokens each turn added (the prompt so far, its reply)
        assert second.per_turn is not None and 1_000 <= second.per_turn <= 1_100
        assert third.per_turn is not None and 1_500 <= third.per_turn <= 1_700
        said = str(board.query_one("#runway").render())
        assert said.startswith(about(third.until_growth or 0).capitalize())
        assert "until the context grows (to 8,192)" in said and "tokens a turn" in said

        # two more turns of this size would fill it: the warning comes before any turn is left out
        await send_and_wait(app, pilot, "d" * 2_000)
        fourth = await runway_after(app, pilot, board)
        assert fourth.committed == 8_192 and fourth.next_step is None
        warning = str(board.query_one("#runway-warning").render())
        assert fourth.turns_left is not None and fourth.turns_left < 3
        assert "oldest turns will be left out" in warning and board.query_one("#runway-warning").display

        await pilot.press("ctrl+n")  # a new chat: the context back to its start, the runway long again
        await wait_for(pilot, lambda: board.runway.committed == 4_096 and board.runway.used == 0)
        assert board.runway.per_turn is None and not board.query_one("#runway-warning").display


async def test_the_kv_plot_draws_in_use_committed_and_the_planned_maximum(shelf: Path) -> None:
    engine = ElasticFakeEngine(reply="ok")
    app = make_app(shelf, engine, settings=Settings(scan_known_caches=False, max_tokens=64))
    async with app.run_test(size=(160, 45)) as pilot:
        await open_chat(app, pilot)
        await send_and_wait(app, pilot, "x" * 3_000)
        kv = app.screen.query_one("#p-kv", TimePlot)
        await wait_for(pilot, lambda: kv.draws > 0 and kv.lines and kv.lines[0].values[-1] > 0)
        kv.scroll_visible(animate=False)  # a plot scrolled out of the panel is not painted
        in_use, committed, planned = (line.values[-1] for line in kv.lines)
        assert 0 < in_use < committed < planned  # three figures ...

        def rows() -> list[str]:
            return [row[1:-1] for row in kv.query_one(SeriesPlot).text("plot")[1:-1]]

        # ... three lines at three heights, once the plot has painted them (a loaded machine paints late)
        await wait_for(pilot, lambda: len([row for row in rows() if row.strip()]) >= 3, timeout=30)
        legend = " ".join(kv.legend_text())
        assert "in use" in legend and "committed 4.0 MiB" in legend and "planned max" in legend


async def test_a_device_plot_keeps_the_models_plan_apart_from_other_programs(shelf: Path) -> None:
    """One vocabulary: "planned" is this model's memory alone; the line that adds other programs' memory
    at the load says so, and the map's KV parts add up to the KV plot's "committed"."""
    app = make_app(shelf, ElasticFakeEngine(reply="ok"), settings=Settings(scan_known_caches=False))
    async with app.run_test(size=(160, 45)) as pilot:
        await open_chat(app, pilot)
        board = app.screen.query_one(Dashboard)
        model = app.session.model
        assert model is not None
        plots = board._device_plots
        await wait_for(pilot, lambda: bool(plots) and all(p.lines for p in plots.values()))
        for usage in [*model.now.gpus, model.now.host]:
            if usage.name not in plots:
                continue
            lines = {line.label: line.values[-1] for line in plots[usage.name].lines}
            assert "planned" not in lines, lines  # never a figure with other programs' memory in it
            others = usage.total - usage.free
            assert lines["other programs at load"] == others > 0
            assert lines["planned + other programs"] - others == usage.planned - usage.weights_mapped
            assert "in use" in lines
        kv = app.screen.query_one("#p-kv", TimePlot)
        await wait_for(pilot, lambda: bool(kv.lines) and bool(board.query(MemoryBar)))
        committed = next(line.values[-1] for line in kv.lines if line.label == "committed")
        parts = [s for bar in board.query(MemoryBar) for s in bar.map.segments]
        assert all("committed" not in s.label for s in parts)  # the map names no part of it "committed"
        assert sum(s.bytes for s in parts if s.key in ("kv_in_use", "kv_empty", "swa")) == committed


def _words(lines: list[str]) -> list[str]:
    return [w for line in lines for w in line.split() if w.strip()]


async def assert_nothing_cut(pilot, board: Dashboard) -> None:
    """Every label of the dashboard whole: text within its widget's width, no ellipsis where a
    figure should be, every legend entry with its figure, every axis label complete."""
    width = board.scrollable_content_region.width
    assert width > 0
    runway = str(board.query_one("#runway").render())
    assert runway and "…" not in runway
    for widget in board.query("*"):
        if widget.display and widget.size.width:
            assert widget.size.width <= width, widget
    for bar in board.query(MemoryBar):
        lines = bar.plain_lines()
        assert all(len(line) <= bar.size.width for line in lines), lines
        text = " ".join(lines)
        assert "…" not in text
        for s in bar.map.segments:  # every part named, with its size
            assert f"{s.label} " in text, (s.label, lines)
    plots = [p for p in board.query(TimePlot) if p.display]
    assert plots
    for plot in plots:
        legend = plot.legend_text()
        assert all(len(line) <= plot.size.width for line in legend) and "…" not in " ".join(legend)
        text = " ".join(legend)
        for line in plot.lines:  # whole, or in its short form where the plot is narrow
            forms = [f"{label} {line.figure}".strip() for label in (line.label, line.short) if label]
            assert any(form in text for form in forms), (line.label, legend)
        series = plot.query_one(SeriesPlot)
        plot.scroll_visible(animate=False)  # a plot is painted (its axes drawn) once it is in view
        await pilot.pause(0.3)
        left = [row.strip() for row in series.text("margin-left") if row.strip()]
        labels = series._y_formatter.get_labels_for_ticks(series._y_ticks or [])
        assert left and set(left) <= set(labels), (left, labels)
        assert all(BYTES_LABEL.match(label) or re.match(r"^\d+(\.\d+)?$", label) for label in left), left
        bottom = _words(series.text("margin-bottom"))
        assert bottom and all(TIME_LABEL.match(w) for w in bottom), bottom


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45), (200, 50)])
async def test_no_label_is_cut_in_the_panel_or_on_the_full_screen(shelf: Path, size: tuple[int, int]) -> None:
    engine = ElasticFakeEngine(reply="Paris is the capital of France.")
    app = make_app(shelf, engine, settings=Settings(scan_known_caches=False, max_tokens=64))
    async with app.run_test(size=size) as pilot:
        await open_chat(app, pilot)
        await send_and_wait(app, pilot, "What is the capital of France? " * 20)
        chat = app.screen
        panel = chat.query_one("#dashboard", Dashboard)
        if size[0] >= 100:  # the panel beside the chat from 100 columns
            assert panel.display
            await wait_for(pilot, lambda: getattr(panel, "runway", None) is not None and panel.query(MemoryBar))
            await pilot.pause(0.6)
            await assert_nothing_cut(pilot, panel)
        else:
            assert not panel.display  # below 100 columns Ctrl+G opens the full dashboard instead
            await pilot.press("ctrl+g")
        if not isinstance(app.screen, DashboardScreen):
            await pilot.press("f3")
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen))
        board = app.screen.query_one(Dashboard)
        await wait_for(pilot, lambda: getattr(board, "runway", None) is not None and board.query(MemoryBar))
        await pilot.pause(0.6)
        await assert_nothing_cut(pilot, board)
        # the table keeps planned, actual and difference whole in view
        table = app.screen.query_one(BufferTable)
        shown = sum(c.get_render_width(table) for c in table.ordered_columns[:4])
        assert shown <= table.scrollable_content_region.width, (shown, table.scrollable_content_region)
        short = size[1] < 32
        optional = [p for p in board.query(".optional")]
        assert all(not p.display for p in optional) if short else all(p.display for p in optional)


async def test_a_receipt_is_kept_with_the_chat_shown_on_demand_and_exported(shelf: Path) -> None:
    engine = ElasticFakeEngine(reply="Paris.")
    app = make_app(shelf, engine, settings=Settings(scan_known_caches=False, max_tokens=64))
    async with app.run_test(size=(160, 45)) as pilot:
        await open_chat(app, pilot)
        await send_and_wait(app, pilot, "What is the capital of France?")
        await send_and_wait(app, pilot, "y" * 5_000)  # the context grows: the receipt keeps the largest
        chat = app.screen
        conv_id = chat.conversation.id
        [kept] = app.store.receipts(conv_id)
        body = kept.body
        assert body["plan"]["config"]["n_ctx"] == 8_192 and body["context"] == {"committed": 6_144, "maximum": 8_192}
        assert body["peaks"]["context_tokens"] > 5_000 and body["peaks"]["devices"]["CUDA0"]["total"] > 0
        assert any(b["kind"] == "kv" for b in body["allocated"]) and body["dry_run"] is None  # a fake has none
        # the replies' own speed counts, though a reply may end between two samples of the telemetry (which read
        # zero between replies); a sample taken while a reply streamed counts too
        reply_speed = round(app.session.engine.last_stats.tokens_per_second, 2)
        assert app.session.telemetry is not None
        sampled = round(max((s.tokens_per_second for s in app.session.telemetry.history()), default=0.0), 2)
        assert body["peaks"]["tokens_per_second"] == max(reply_speed, sampled) and reply_speed > 0

        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ReceiptScreen), timeout=5)
        assert "CUDA0" in app.screen.query_one("Markdown")._markdown  # type: ignore[attr-defined]
        await pilot.press("escape")
        await pilot.pause()

        await pilot.press("ctrl+s")
        await pilot.pause()
        saved = [str(n.message) for n in app._notifications if str(n.message).startswith("Saved as Markdown and JSON")]
        paths = [Path(p) for p in saved[-1].splitlines()[1:]]
        assert sorted(p.suffix for p in paths) == [".json", ".md"]
        data = json.loads(next(p for p in paths if p.suffix == ".json").read_text())
        assert data["receipts"][0]["plan"]["config"]["n_ctx"] == 8_192 and data["messages"][0]["role"] == "user"
        markdown = next(p for p in paths if p.suffix == ".md").read_text()
        assert "## Plan receipt" in markdown and "| CUDA0 |" in markdown

        await pilot.press("ctrl+n")
        await send_and_wait(app, pilot, "Another chat")
        # the list, with the first chat chosen: F8 shows that chat's receipt, not the open one's
        chat.action_toggle_chats()
        await pilot.pause()
        chats = chat.query_one("#chat-list")
        chats.focus()
        chats.highlighted = next(
            i for i in range(chats.option_count) if chats.get_option_at_index(i).id == str(conv_id)
        )
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ReceiptScreen), timeout=5)
        assert len(app.screen.receipts) == 1
        assert app.screen.receipts[0]["plan"] == body["plan"]
        assert app.screen.receipts[0]["peaks"]["context_tokens"] > 5_000
