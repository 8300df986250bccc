"""Planned, dry run and actual, per buffer: the plan's buffers beside what llama.cpp's dry run computed
before the load and the sizes it logged while loading."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable

from app.engine import Measurements
from app.engine.verify import Verification
from planner.devices import format_size
from planner.memory import Buffer

LOG_PRECISION = 10_486  # llama.cpp logs sizes in MiB with two decimals: 0.01 MiB
_KIND_WORDS = {
    "model": "weights",
    "kv": "KV cache",
    "kv_swa": "KV cache (SWA)",
    "rs": "recurrent state",
    "output": "output",
    "compute": "compute",
}


@dataclass(frozen=True)
class BufferRow:
    name: str
    kind: str
    planned: int | None
    actual: int | None
    dry_run: int | None = None  # llama.cpp's no_alloc dry run, where it gave a figure for this buffer

    @property
    def delta(self) -> int | None:
        if self.planned is None or self.actual is None:
            return None
        return self.actual - self.planned

    @property
    def matches(self) -> bool:
        d = self.delta
        return d is not None and abs(d) <= LOG_PRECISION


def _measured(m: Measurements) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for kind, table in (
        ("model", m.model),
        ("kv", m.kv),
        ("kv_swa", m.kv_swa),
        ("rs", m.recurrent),
        ("output", m.output),
        ("compute", m.compute),
    ):
        for name, size in table.items():
            out[(kind, name)] = size
    return out


def planned_vs_actual(
    buffers: list[Buffer], measurements: Measurements | None, verification: Verification | None = None
) -> list[BufferRow]:
    """One row per buffer the plan or llama.cpp names; a side that lacks it shows None."""
    actual = _measured(measurements) if measurements is not None else {}
    rows: list[BufferRow] = []
    seen: set[tuple[str, str]] = set()
    per_device: dict[tuple[str, str], int] = {}
    for b in buffers:
        per_device[(b.kind, b.device)] = per_device.get((b.kind, b.device), 0) + 1
    for b in buffers:
        key = (b.kind, b.name)
        seen.add(key)
        dry = None
        if verification is not None and per_device[(b.kind, b.device)] == 1:
            dry = verification.measured(b.kind, b.device)
        rows.append(BufferRow(b.name, b.kind, b.bytes, actual.get(key) if measurements is not None else None, dry))
    for (kind, name), size in actual.items():
        if (kind, name) not in seen:
            rows.append(BufferRow(name, kind, None, size))
    return rows


def _size(n: int | None) -> str:
    return "-" if n is None else format_size(n)


class BufferTable(DataTable):
    """The planned-vs-actual table (read-only)."""

    def on_mount(self) -> None:
        self.cursor_type = "none"
        self.zebra_stripes = True
        self.add_columns("buffer", "what", "planned", "dry run", "actual", "difference")

    def fill(self, rows: list[BufferRow]) -> None:
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
