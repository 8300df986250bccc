"""The dashboard's widgets, each in a small host app (no session, no engine)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from app.engine.planned_actual import BufferLine
from app.tui.widgets.buffers import BufferTable
from app.tui.widgets.memory_graph import MemoryGraph, bar_rows
from planner.hardware import MiB, format_size


class _Host(App[None]):
    def __init__(self, widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


def _cells(table: BufferTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_buffer_table_names_differences_and_totals() -> None:
    table = BufferTable()
    async with _Host(table).run_test(size=(100, 12)) as pilot:
        table.fill(
            [
                BufferLine("CUDA0", "weights", 100 * MiB, 100 * MiB),
                BufferLine("CUDA0", "kv", 8 * MiB, 10 * MiB, dry_run=10 * MiB),
                BufferLine("CUDA_Host", "compute", 4 * MiB, None),
            ]
        )
        await pilot.pause()
        rows = _cells(table)
    assert [r[1] for r in rows[:3]] == ["weights", "KV cache", "compute"]
    assert rows[0][5].startswith("=")  # equal to the log's precision
    assert rows[1][5] == "+2.0 MiB" and rows[1][3] == format_size(10 * MiB)
    assert rows[2][5] == "not measured" and rows[2][4] == "-"
    assert rows[3][0] == "total" and rows[3][2] == format_size(112 * MiB) and rows[3][4] == format_size(110 * MiB)


async def test_memory_graph_fills_its_ceiling_and_shows_the_caption() -> None:
    graph = MemoryGraph("KV cache", format_size)
    async with _Host(graph).run_test(size=(40, 4)) as pilot:
        graph.update_series([0, 25 * MiB, 50 * MiB], 50 * MiB, caption="50 MiB of 50 MiB")
        await pilot.pause()
        lines = str(graph.render()).splitlines()
        height = graph.size.height
    assert lines[0].startswith("KV cache") and lines[0].endswith("50 MiB of 50 MiB")
    assert lines[1].endswith(" █") and lines[-1].endswith("██")  # the newest value reaches the top, half of it half
    assert len(lines) == height == 4


def test_bars_scale_to_the_ceiling_not_to_their_maximum() -> None:
    half = bar_rows([5.0], 10.0, width=1, height=2)
    full = bar_rows([10.0], 10.0, width=1, height=2)
    assert half == [" ", "█"] and full == ["█", "█"]
    assert bar_rows([1.0, 2.0, 3.0], 3.0, width=2, height=1) == ["▅█"]  # the oldest value scrolled off


async def test_the_dashboard_draws_a_graph_per_device_and_drops_one_left_out() -> None:
    from app.telemetry import Sample
    from app.tui.widgets.dashboard import Dashboard

    def sample(devices: dict[str, tuple[int, int]]) -> Sample:
        return Sample(0.0, devices, 100 * MiB, {"CPU": MiB}, 0, 0, 0, 0.0, False)

    board = Dashboard(lambda: None)
    both = {"RPC0": (MiB, 8 * 1024 * MiB), "RPC1": (2 * MiB, 8 * 1024 * MiB), "CPU": (MiB, 16 * 1024 * MiB)}
    async with _Host(board).run_test(size=(60, 60)) as pilot:
        board.show([sample(both)])
        await pilot.pause()
        titles = [str(g.render()).splitlines()[0] for g in board.query(".device-graph")]
        assert [t.split()[0] for t in titles] == ["RPC0", "RPC1", "Host"] and "(remote)" in titles[0]
        board.show([sample({k: v for k, v in both.items() if k != "RPC1"})])  # reloaded without RPC1
        await pilot.pause()
        assert [str(g.render()).split()[0] for g in board.query(".device-graph")] == ["RPC0", "Host"]
