"""The dashboard's bar graph and the planned-vs-actual rows."""

from __future__ import annotations

from app.engine import Measurements
from app.engine.planned_actual import per_buffer
from app.tui.widgets.memory_graph import bar_rows
from planner.memory import Buffer


def test_bar_rows_scale_to_the_ceiling() -> None:
    assert bar_rows([0, 50, 100], 100, 3, 1) == [" ▄█"]
    assert bar_rows([100], 100, 3, 2) == ["  █", "  █"]
    assert bar_rows([25], 100, 1, 2) == [" ", "▄"]
    assert bar_rows([1], 1000, 1, 1) == ["▁"]  # anything above zero shows
    assert bar_rows(range(10), 10, 4, 1)[0][-1] == "▇"  # newest on the right, clipped to the width


def test_per_buffer() -> None:
    buffers = [
        Buffer("CPU", "weights", "CPU_Mapped", 1000),
        Buffer("CPU", "kv", "CPU", 2_000_000),
        Buffer("CPU", "compute", "CPU", 5_000_000),
    ]
    m = Measurements(
        model={"CPU_Mapped": 1000}, kv={"CPU": 2_004_000}, compute={"CPU": 6_000_000}, output={"CPU": 4096}
    )
    rows = {(r.kind, r.name): r for r in per_buffer(buffers, m)}
    assert rows[("weights", "CPU_Mapped")].matches
    assert rows[("kv", "CPU")].matches  # within the log's 0.01 MiB
    assert rows[("compute", "CPU")].delta == 1_000_000 and not rows[("compute", "CPU")].matches
    assert rows[("output", "CPU")].planned is None  # measured but not planned: shown, not hidden
    assert all(r.actual is None for r in per_buffer(buffers, None))
