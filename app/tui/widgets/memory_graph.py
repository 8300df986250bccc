"""A labelled time-series graph: a title line with the current value, then bars.

Unlike Textual's Sparkline, the scale is fixed to a ceiling the caller gives (a
device's total memory, the KV cache allocated), so "KV in use" visibly fills its
allocation instead of being rescaled to its own maximum. Eighth-blocks give each
row eight steps; newest values are on the right.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.widget import Widget

_EIGHTHS = " ▁▂▃▄▅▆▇█"


def bar_rows(values: Sequence[float], ceiling: float, width: int, height: int) -> list[str]:
    """The bars as `height` strings of `width` characters, top row first."""
    if width <= 0 or height <= 0:
        return []
    values = list(values)[-width:]
    pad = width - len(values)
    steps = height * 8
    levels = [0] * pad + [
        0 if ceiling <= 0 or v <= 0 else max(1, min(steps, round(v / ceiling * steps))) for v in values
    ]
    rows = []
    for row in range(height):
        base = (height - 1 - row) * 8
        rows.append("".join(_EIGHTHS[min(8, max(0, level - base))] for level in levels))
    return rows


class MemoryGraph(Widget):
    """Title, current value and a bar history; `update_series` is called from the UI thread."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"graph--bar", "graph--title", "graph--value", "graph--floor"}
    DEFAULT_CSS = """
    MemoryGraph { height: 4; }
    MemoryGraph > .graph--bar { color: $primary; }
    MemoryGraph > .graph--title { text-style: bold; }
    MemoryGraph > .graph--value { color: $text-muted; }
    MemoryGraph > .graph--floor { color: $foreground 25%; }
    """

    def __init__(
        self, title: str, formatter: Callable[[float], str], *, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.formatter = formatter
        self.values: tuple[float, ...] = ()
        self.ceiling = 0.0
        self.caption = ""
        self._drawn: tuple[object, ...] = ()

    def update_series(self, values: Sequence[float], ceiling: float, caption: str = "") -> None:
        """New data; `caption` replaces the value line (e.g. "3.1 MiB of 28 MiB").

        Repaints only when what would be drawn changes: an idle dashboard costs next to nothing."""
        self.values, self.ceiling, self.caption = tuple(values), ceiling, caption
        width, height = self.size.width, max(1, self.size.height - 1)
        drawn = (caption, width, height, tuple(bar_rows(self.values, ceiling, width, height)))
        if drawn != self._drawn:
            self._drawn = drawn
            self.refresh()

    def render(self) -> Text:
        width = self.size.width
        height = max(1, self.size.height - 1)
        bar = self.get_component_rich_style("graph--bar")
        current = self.values[-1] if self.values else 0.0
        caption = self.caption or self.formatter(current)
        title = self.title if len(self.title) + len(caption) < width else self.title.split(" ")[0]
        out = Text(title, style=self.get_component_rich_style("graph--title"))
        out.append(" " * max(1, width - len(title) - len(caption)))
        out.append(caption, style=self.get_component_rich_style("graph--value"))
        out.truncate(width)
        rows = bar_rows(self.values, self.ceiling, width, height)
        for row in rows[:-1]:
            out.append("\n")
            out.append(row, style=bar)
        if rows:
            # the bottom row: a faint floor line where there is no bar, so an empty graph still shows
            last = rows[-1]
            empty = len(last) - len(last.lstrip(" "))
            out.append("\n")
            out.append("▁" * empty, style=self.get_component_rich_style("graph--floor"))
            out.append(last[empty:].replace(" ", "▁"), style=bar)
        return out
