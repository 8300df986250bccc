"""The columns a table of models or repositories shows at a terminal's width, and its rows drawn again under them.

The model list, the hub's repositories and its quants each keep a few columns always and show the others
while the terminal has room; a layout is (key, label, width) a column, and a change of layout draws every
row again (a DataTable's columns cannot be narrowed in place).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from textual.widgets import DataTable

Column = tuple[str, str, int]  # key, label, width in cells
CHROME = 4  # a table's two borders and its scrollbar
PADDING = 2  # a cell of padding each side of every column


def columns_at(
    width: int, columns: Sequence[tuple[str, str, int, int]], name_min: int, name_max: int
) -> tuple[Column, ...]:
    """The columns a terminal `width` wide shows (each from its fourth figure on); the one of width 0, the
    name, takes the room left, held between `name_min` and `name_max`."""
    shown = [c for c in columns if width >= c[3]]
    left = width - CHROME - sum(w + PADDING for _, _, w, _ in shown)
    name = max(name_min, min(name_max, left))
    return tuple((key, label, w or name) for key, label, w, _ in shown)


def redraw(table: DataTable[Any], layout: Sequence[Column], rows: Iterable[tuple[str, Mapping[str, Any], int]]) -> None:
    """`table` cleared and drawn again: `layout`'s columns, then each row (its key, its cells by column key,
    its height in lines)."""
    table.clear(columns=True)
    for key, label, width in layout:
        table.add_column(label, key=key, width=width)
    for row_key, cells, height in rows:
        table.add_row(*[cells[key] for key, _, _ in layout], key=row_key, height=height)
