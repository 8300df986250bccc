"""The planned, allocated and dry run table, per buffer (the rows come from app.engine.planned_actual).

The columns a user checks first come first (planned, allocated, difference), so that they stay in
view on an 80-column terminal; the dry run, which sized the plan's maximum context before the
load, comes last with a mark saying whether it agreed with the plan it sized.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from app.engine.planned_actual import BufferLine
from app.memory_words import ALLOCATED, PLANNED
from planner.hardware import format_size

KIND_WORDS = {
    "weights": "weights",
    "kv": "KV cache",
    "kv_swa": "SWA cache",
    "recurrent": "recurrent state",
    "output": "output",
    "compute": "compute arena",
    "projector_weights": "projector",
    "projector_compute": "projector compute",
}
COLUMNS = ("buffer", PLANNED, ALLOCATED, "difference", "dry run")
AGREED = "✓"


def _size(n: int | None) -> str:
    return "-" if n is None else format_size(n)


def dry_run_cell(r: BufferLine) -> Text:
    if r.dry_run is None:
        return Text("-", justify="right")
    if r.dry_matches:
        return Text(f"{format_size(r.dry_run)} {AGREED}", justify="right")
    return Text(f"{format_size(r.dry_run)} ≠", justify="right")


class BufferTable(DataTable):
    """The planned-vs-allocated table (read-only)."""

    def on_mount(self) -> None:
        self.cursor_type = "none"
        self.zebra_stripes = True
        self.add_columns(*COLUMNS)

    def fill(self, rows: list[BufferLine]) -> None:
        self.clear()
        theme = self.app.current_theme
        total_p = sum(r.planned or 0 for r in rows)
        total_a = sum(r.actual or 0 for r in rows)
        for r in rows:
            if r.delta is None:
                diff = Text("not measured" if r.actual is None else "not planned", style=theme.warning or "")
            elif r.matches:
                diff = Text("=", style=theme.success or "")
            else:
                sign = "+" if r.delta > 0 else "-"
                diff = Text(f"{sign}{format_size(abs(r.delta))}", style=theme.warning or "")
            self.add_row(
                f"{r.name} {KIND_WORDS.get(r.kind, r.kind)}",
                Text(_size(r.planned), justify="right"),
                Text(_size(r.actual), justify="right"),
                diff,
                dry_run_cell(r),
            )
        self.add_row(
            Text("total", style="bold"),
            Text(format_size(total_p), justify="right", style="bold"),
            Text(
                format_size(total_a) if any(r.actual is not None for r in rows) else "-", justify="right", style="bold"
            ),
            "",
            "",
        )
