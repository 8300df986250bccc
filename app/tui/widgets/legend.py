"""A legend that never cuts a label: its entries are packed into as many lines as the width needs.

Each entry (a coloured mark, a label, a figure) stays whole on one line; the next entry goes on
the next line when it would not fit. The widget's height follows (`height: auto`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

GAP = 2  # spaces between two entries on a line


Entry = Text | tuple[Text, Text]  # an entry, or (an entry, its short form where the full one is too wide)


def pack(entries: Sequence[Entry], width: int, lead: Text | None = None) -> list[Text]:
    """The entries as lines of at most `width` cells, each entry whole (one wider than the line
    takes its short form where it has one; else it gets a line of its own and folds there, rather
    than being cut). `lead` (a title) starts the first line."""
    lines: list[Text] = []
    line = lead.copy() if lead is not None and lead.cell_len else None
    for given in entries:
        entry = _fitting(given, width)
        if line is None:
            line = entry.copy()
        elif line.cell_len + GAP + entry.cell_len <= width:
            line.append(" " * GAP)
            line.append_text(entry)
        else:
            lines.append(line)
            line = entry.copy()
    if line is not None:
        lines.append(line)
    out: list[Text] = []
    for one in lines:
        if one.cell_len <= width or width <= 0:
            out.append(one)
        else:
            out.extend(one.wrap(_console(), width, overflow="fold"))
    return out


def _fitting(entry: Entry, width: int) -> Text:
    if isinstance(entry, Text):
        return entry
    full, short = entry
    return full if full.cell_len <= width or width <= 0 else short


def _console():
    from rich.console import Console

    return Console(width=10_000)


class Legend(Widget):
    """Entries packed into lines; `lead` is a title that starts the first line."""

    DEFAULT_CSS = """
    Legend { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lead: Text | None = None
        self.entries: list[Entry] = []
        self._shown: tuple[str, ...] = ()

    def set_entries(self, entries: Sequence[Entry], lead: Text | None = None) -> None:
        """New entries; repaints (and lays out again) only when the text changed."""
        full = [e if isinstance(e, Text) else e[0] for e in entries]
        key = tuple(e.markup for e in full) + ((lead.markup,) if lead is not None else ())
        if key == self._shown:
            return
        self._shown = key
        lines = len(self.lines()) if self.size.width else -1
        self.entries, self.lead = list(entries), lead
        # a new layout of the screen only when the legend takes another number of lines: a figure
        # that changes twice a second would otherwise lay the whole screen out twice a second
        self.refresh(layout=len(self.lines()) != lines)

    def lines(self, width: int | None = None) -> list[Text]:
        return pack(self.entries, width if width is not None else self.size.width, self.lead)

    def plain_lines(self) -> list[str]:
        """The lines as drawn at the widget's width (what tests read)."""
        return [line.plain for line in self.lines()]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(len(self.lines(width)), 1)

    def render(self) -> Text:
        return Text("\n").join(self.lines())
