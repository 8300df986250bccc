"""The planned, dry run and actual table, per buffer (the rows come from app.engine.planned_actual)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from app.engine.planned_actual import BufferLine
from planner.hardware import format_size

_KIND_WORDS = {
    "weights": "weights",
    "kv": "KV cache",
    "kv_swa": "KV cache (SWA)",
    "recurrent": "recurrent state",
    "output": "output",
    "compute": "compute",
}


def _size(n: int | None) -> str:
    return "-" if n is None else format_size(n)


class BufferTable(DataTable):
    """The planned-vs-actual table (read-only)."""

    def on_mount(self) -> None:
        self.cursor_type = "none"
        self.zebra_stripes = True
        self.add_columns("buffer", "what", "planned", "dry run", "actual", "difference")

    def fill(self, rows: list[BufferLine]) -> None:
        self.clear()
        theme = self.app.current_theme
        total_p = sum(r.planned or 0 for r in rows)
        total_a = sum(r.actual or 0 for r in rows)
        for r in rows:
            if r.delta is None:
                diff = Text("not measured" if r.actual is None else "not planned", style=theme.warning or "")
            elif r.matches:
                diff = Text("= (log precision)", style=theme.success or "")
            else:
                sign = "+" if r.delta > 0 else "-"
                diff = Text(f"{sign}{format_size(abs(r.delta))}", style=theme.warning or "")
            self.add_row(
                r.name,
                _KIND_WORDS.get(r.kind, r.kind),
                Text(_size(r.planned), justify="right"),
                Text(_size(r.dry_run), justify="right"),
                Text(_size(r.actual), justify="right"),
                diff,
            )
        self.add_row(
            Text("total", style="bold"),
            "",
            Text(format_size(total_p), justify="right", style="bold"),
            "",
            Text(
                format_size(total_a) if any(r.actual is not None for r in rows) else "-", justify="right", style="bold"
            ),
            "",
        )
