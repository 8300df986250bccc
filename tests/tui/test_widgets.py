"""The dashboard's widgets, each in a small host app (no session, no engine)."""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import App, ComposeResult

from app.engine import Measurements
from app.engine.planned_actual import BufferLine, per_buffer
from app.telemetry.memory_map import DeviceMap, Segment
from app.tui.widgets.buffers import BufferTable
from app.tui.widgets.legend import pack
from app.tui.widgets.memory_bar import MemoryBar
from app.tui.widgets.time_plot import Line, SeriesPlot, TimePlot
from planner.hardware import GiB, MiB, format_size
from planner.memory import Buffer


class _Host(App[None]):
    def __init__(self, widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


def _cells(table: BufferTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_buffer_table_puts_planned_actual_and_difference_first_and_marks_the_dry_run() -> None:
    table = BufferTable()
    async with _Host(table).run_test(size=(80, 12)) as pilot:
        table.fill(
            [
                BufferLine("CUDA0", "weights", 100 * MiB, 100 * MiB),
                BufferLine("CUDA0", "kv", 8 * MiB, 10 * MiB, dry_run=80 * MiB, dry_planned=80 * MiB),
                BufferLine("CUDA_Host", "compute", 4 * MiB, None, dry_run=6 * MiB, dry_planned=4 * MiB),
            ]
        )
        await pilot.pause()
        rows = _cells(table)
        header = [str(c.label) for c in table.ordered_columns]
        # the table's columns fit 80 columns: nothing scrolled off
        assert sum(c.get_render_width(table) for c in table.ordered_columns) <= 78
    assert header == ["buffer", "planned", "allocated", "difference", "dry run"]
    assert [r[0] for r in rows[:3]] == ["CUDA0 weights", "CUDA0 KV cache", "CUDA_Host compute arena"]
    assert rows[0][3] == "=" and rows[0][4] == "-"  # equal to the log's precision; the dry run reads no weights
    assert rows[1][3] == "+2.0 MiB" and rows[1][4] == f"{format_size(80 * MiB)} ✓"  # agreed with the plan it sized
    assert rows[2][3] == "not measured" and rows[2][2] == "-" and rows[2][4].endswith("≠")
    assert rows[3][0] == "total" and rows[3][1] == format_size(112 * MiB) and rows[3][2] == format_size(110 * MiB)


def test_per_buffer_sets_the_dry_run_beside_the_figure_it_sized() -> None:
    from app.engine.dry_run import DryRun
    from app.engine.verify import Verification
    from planner.measured import Gap

    buffers = [
        Buffer("CPU", "weights", "CPU_Mapped", 1000),
        Buffer("CPU", "kv", "CPU", 2_000_000),
        Buffer("CPU", "compute", "CPU", 5_000_000),
    ]
    m = Measurements(
        model={"CPU_Mapped": 1000}, kv={"CPU": 2_004_000}, compute={"CPU": 6_000_000}, output={"CPU": 4096}
    )
    # the dry run sized the maximum context: its KV figure is set beside the maximum plan's, not today's
    v = Verification(DryRun(True, 0.5), [Gap("kv", ("CPU",), 16_000_000, 16_000_000, 10_486)])
    rows = {(r.kind, r.name): r for r in per_buffer(buffers, m, v)}
    assert rows[("weights", "CPU_Mapped")].matches and rows[("weights", "CPU_Mapped")].dry_run is None
    kv = rows[("kv", "CPU")]
    assert kv.matches and kv.dry_run == kv.dry_planned == 16_000_000 and kv.dry_matches
    assert rows[("compute", "CPU")].delta == 1_000_000 and not rows[("compute", "CPU")].matches
    assert rows[("output", "CPU")].planned is None  # measured but not planned: shown, not hidden
    assert all(r.actual is None for r in per_buffer(buffers, None))


def test_a_legend_packs_whole_entries_and_never_cuts_one() -> None:
    entries = [Text("██ weights 1.20 GiB"), Text("██ KV in use 397 KiB"), Text("░░ KV reserved for growth 4.0 MiB")]
    lines = [t.plain for t in pack(entries, 42, Text("CUDA0"))]
    assert lines == ["CUDA0  ██ weights 1.20 GiB", "██ KV in use 397 KiB", "░░ KV reserved for growth 4.0 MiB"]
    assert all(len(line) <= 42 for line in lines)
    assert [t.plain for t in pack(entries, 80)] == [
        "██ weights 1.20 GiB  ██ KV in use 397 KiB  ░░ KV reserved for growth 4.0 MiB"
    ]


async def test_a_memory_bar_is_to_scale_and_labels_every_part() -> None:
    bar = MemoryBar()
    parts = [Segment("weights", 2 * GiB), Segment("kv_in_use", 1 * GiB), Segment("free", 5 * GiB)]
    async with _Host(bar).run_test(size=(42, 10)) as pilot:
        bar.show(DeviceMap("CUDA0", 8 * GiB, parts))
        await pilot.pause()
        lines = bar.plain_lines()
    assert lines[0] == "CUDA0 · 8.00 GiB"
    # 2, 1 and 5 of 8 GiB in 42 cells: 10.5, 5.25 and 26.25, the largest remainder rounded up
    assert lines[1] == "█" * 11 + "█" * 5 + "·" * 26
    legend = " ".join(lines[2:])
    assert "weights 2.00 GiB" in legend and "KV in use 1.00 GiB" in legend and "free 5.00 GiB" in legend
    assert "…" not in legend
    assert "KV in use: 1.00 GiB, the attention cache" in str(bar.tooltip)


async def test_a_time_plot_draws_the_planned_and_the_measured_line_with_whole_axis_labels() -> None:
    plot = TimePlot("CUDA0 memory")
    async with _Host(plot).run_test(size=(50, 10)) as pilot:
        await pilot.pause()
        times = [100.0 + i * 0.5 for i in range(60)]
        measured = [1 * GiB + i * 40 * MiB for i in range(60)]
        plot.show(
            times,
            times[-1],
            [Line("planned", [6 * GiB] * 60, "planned", "6.00 GiB"), Line("used", measured, "measured", "3.30 GiB")],
            8 * GiB,
            60.0,
            [0, 4 * GiB, 8 * GiB],
        )
        await pilot.pause(0.2)
        plot.show(times, times[-1], plot.lines, 8 * GiB, 60.0, [0, 4 * GiB, 8 * GiB])  # at the size laid out
        await pilot.pause(0.2)
        series = plot.query_one(SeriesPlot)
        canvas = series.text("plot")
        left = series.text("margin-left")
        bottom = series.text("margin-bottom")[0]
        drawn = plot.draws
        plot.show(times, times[-1], plot.lines, 8 * GiB, 60.0, [0, 4 * GiB, 8 * GiB])  # nothing moved
        assert plot.draws == drawn
        legend = plot.legend_text()
    assert legend == ["CUDA0 memory  ┅┅ planned 6.00 GiB", "━━ used 3.30 GiB"]
    inside = [row[1:-1] for row in canvas[1:-1]]
    flat = [i for i, row in enumerate(inside) if len(re.findall("⠉+", row)) >= 3]
    assert flat == [1]  # the planned 6 of 8 GiB: a dashed line three quarters up
    climbing = [i for i, row in enumerate(inside) if row.strip() and i not in flat]
    assert len(climbing) >= 2 and min(climbing) > flat[0]  # the measured line rises below it, over two rows
    assert [line.strip() for line in left if line.strip()] == ["8 GiB", "4 GiB", "0"]
    assert bottom.split() == ["-1m", "-45s", "-30s", "-15s", "now"]


async def test_a_plan_that_is_right_still_shows_both_lines() -> None:
    plot = TimePlot("KV cache")
    async with _Host(plot).run_test(size=(50, 10)) as pilot:
        times = [100.0 + i * 0.5 for i in range(120)]
        same = [3 * MiB] * 120
        lines = [Line("planned", same, "planned"), Line("allocated", same, "measured")]
        for _ in range(2):
            plot.show(times, times[-1], lines, 4 * MiB, 60.0)
            await pilot.pause(0.2)
        canvas = plot.query_one(SeriesPlot).query_one("#plot")
        theme = plot.app.current_theme
        inner = [(r[1:-1], st[1:-1]) for r, st in zip(canvas._buffer[1:-1], canvas._styles[1:-1])]
        chars, styles = next((r, st) for r, st in inner if "".join(r).strip())
        colours = {style for char, style in zip(chars, styles) if char.strip()}
    # the two lines fall on the same cells: the planned one dashed over the measured, both seen
    assert {theme.accent, theme.primary} <= colours


async def test_the_last_points_are_drawn_though_no_sample_follows() -> None:
    """A plot draws at most once a second; points shown sooner are drawn when the second is up,
    even when the sampler has stopped meanwhile (the last reply's tail must not go missing)."""
    plot = TimePlot("Tokens/s")
    async with _Host(plot).run_test(size=(50, 10)) as pilot:
        await pilot.pause()
        times = [100.0 + i * 0.5 for i in range(20)]
        idle = [0.0] * 20
        plot.show(times, times[-1], [Line("now", idle)], 100.0, 10.0, active=True)
        await pilot.pause(0.2)
        plot.show(times, times[-1], [Line("now", idle)], 100.0, 10.0, active=True)  # at the size laid out
        await pilot.pause()
        drawn = plot.draws
        burst = [0.0] * 10 + [90.0] * 10
        plot.show(times, times[-1], [Line("now", burst)], 100.0, 10.0, active=True)  # within the second
        assert plot.draws == drawn and plot.waiting
        await pilot.pause(1.2)  # and no sample after it
        rows = plot.query_one(SeriesPlot).text("plot")
    assert plot.draws == drawn + 1 and not plot.waiting
    top = [row[1:-1] for row in rows[1:3]]
    assert any(row.strip() for row in top)  # the burst near the top of the plot


async def test_a_plot_removed_with_a_redraw_pending_goes_quietly() -> None:
    """A device that leaves (an RPC server left out) takes its plot away while a redraw it asked
    for is still pending: the app must not stop on it (it once did, with NoMatches)."""
    plot = TimePlot("RPC1 memory")
    host = _Host(plot)
    async with host.run_test(size=(50, 10)) as pilot:
        await pilot.pause()
        times = [100.0 + i * 0.5 for i in range(20)]
        plot.show(times, times[-1], [Line("used", [1.0] * 20)], 2.0, 10.0)
        await pilot.pause()
        plot.show(times, times[-1], [Line("used", [2.0] * 20)], 2.0, 10.0)  # held back: a timer
        await plot.remove()
        plot.redraw()  # as a canvas resized just before asked, after the next refresh
        await pilot.pause(1.2)
        assert host.is_running and not plot.is_attached


async def test_a_plot_removed_as_soon_as_it_is_mounted_goes_quietly() -> None:
    """A device seen for one sample gets a plot that is taken away again before its mount event
    runs: the app must not stop on it (a CI run once did, with NoMatches in on_mount)."""
    host = _Host(TimePlot("CPU memory"))
    async with host.run_test(size=(50, 10)) as pilot:
        await pilot.pause()
        for _ in range(5):
            plot = TimePlot("RPC0 memory")
            host.screen.mount(plot)
            plot.remove()
            await pilot.pause(0)
        await pilot.pause(0.2)
        assert host.is_running and not plot.is_attached
