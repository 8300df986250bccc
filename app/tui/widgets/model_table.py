"""The model list: every GGUF found, a row each, with its fit badge; columns as wide as the terminal allows.

The list holds its entries (`entries`, keyed by `CatalogEntry.file.entry_id`); rows fill in as they are
planned. Rows whose names read the same (copies of one model in several folders) are told apart by what
differs in their paths.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import DataTable

from app.catalog import CatalogEntry, fit_badge, format_params
from app.terminal_text import terminal_safe
from app.tui.badges import badge_style
from app.tui.widgets.table_columns import Column, columns_at, redraw
from planner.units import format_size

# The columns: (key, label, width, the narrowest screen that shows it). Widths are fixed (rows fill in as
# they are planned, and auto widths would keep the first guess); the model's name takes what is left. The
# fit column holds the longest badge whole ("partial · 12/33 layers · estimate ↻"); below 150 columns the
# less important columns go first, name, size and fit stay.
COLUMNS: tuple[tuple[str, str, int, int], ...] = (
    ("name", "Model", 0, 0),
    ("arch", "Arch", 10, 150),
    ("params", "Params", 6, 100),
    ("quant", "Quant", 8, 100),
    ("size", "Size", 10, 0),
    ("fit", "Fit on this machine", 36, 0),
    ("source", "Found in", 12, 150),
)
NAME_MIN, NAME_MAX = 16, 48


class ModelTable(DataTable[str | Text]):
    EARLY_KEYS = ("up", "down", "pageup", "pagedown", "home", "end", "enter")

    def __init__(self) -> None:
        super().__init__(id="models", cursor_type="row", zebra_stripes=True)
        self.border_title = "Models"
        self.entries: dict[str, CatalogEntry] = {}
        self._columns_shown: tuple[Column, ...] = ()
        self._apart: dict[str, str] = {}  # rows whose names read the same: what tells each apart (" · folder")
        self._early_keys: list[str] = []  # moves in the list made before it was drawn, made after

    def lay_out(self, screen_width: int, selected: str | None) -> None:
        """The columns that fit `screen_width`, the rows drawn again under them, the cursor on `selected`."""
        layout = columns_at(screen_width, COLUMNS, NAME_MIN, NAME_MAX)
        if layout == self._columns_shown:
            return
        self._columns_shown = layout
        redraw(self, layout, ((e.file.entry_id, self._cells(e), 1) for e in self.entries.values()))
        if selected in self.entries:
            self.move_cursor(row=self.get_row_index(selected))

    # -- keys pressed before the list is drawn ----------------------------------------------------

    def on_key(self, event: events.Key) -> None:
        """Keys pressed before the list is drawn are kept and played once it is (`play_early_keys`), not lost."""
        if not self.entries and event.key in self.EARLY_KEYS:
            event.stop()
            event.prevent_default()
            self._early_keys.append(event.key)

    def play_early_keys(self) -> bool:
        """The moves kept, made; whether Enter was among them (load the model the cursor is on, once planned)."""
        moves = {
            "up": self.action_cursor_up,
            "down": self.action_cursor_down,
            "pageup": self.action_page_up,
            "pagedown": self.action_page_down,
            "home": self.action_scroll_home,
            "end": self.action_scroll_end,
        }
        enter = False
        for key in self._early_keys:
            if key == "enter":
                enter = True
            else:
                moves[key]()
        self._early_keys.clear()
        return enter

    # -- the entries ----------------------------------------------------------------------------

    def show(self, entries: list[CatalogEntry]) -> None:
        """The list of a scan: these entries, in this order, and no other."""
        self.clear()
        self.entries = {}
        for entry in entries:
            self.entries[entry.file.entry_id] = entry
            self.add_row(*self._row(entry), key=entry.file.entry_id)
        self._tell_apart()

    def add(self, entries: list[CatalogEntry]) -> None:
        """Entries found late (the demo model, once assembled) at the list's end."""
        for entry in entries:
            if entry.file.entry_id not in self.entries:
                self.entries[entry.file.entry_id] = entry
                self.add_row(*self._row(entry), key=entry.file.entry_id)
        self._tell_apart()

    def update(self, entries: list[CatalogEntry]) -> None:
        """Entries planned (or checked) since they were listed: their rows drawn again."""
        for entry in entries:
            self.entries[entry.file.entry_id] = entry
            if entry.file.entry_id not in self.rows:
                continue
            cells = self._cells(entry)
            for key, _, _ in self._columns_shown:
                self.update_cell(entry.file.entry_id, key, cells[key])
        self._tell_apart()  # a name read from its header may be another row's too

    def forget(self, key: str) -> int:
        """The entry `key` leaves the list; the row it was in (0 where it was not listed)."""
        row = self.get_row_index(key) if key in self.rows else 0
        if key in self.rows:
            self.remove_row(key)
        self.entries.pop(key, None)
        self._tell_apart()
        return row

    def point_at(self, key: str) -> None:
        """The cursor on the entry `key`."""
        self.move_cursor(row=self.get_row_index(key))

    # -- the rows -------------------------------------------------------------------------------

    def _row(self, entry: CatalogEntry) -> list[str | Text]:
        cells = self._cells(entry)
        return [cells[key] for key, _, _ in self._columns_shown]

    def _row_name(self, entry: CatalogEntry) -> Text:
        """The model's name as its row reads, before anything that tells it from a namesake."""
        name = Text(entry.name)
        if entry.file.is_demo:
            name.append(" demo", style="italic dim")
        if len(entry.file.shards) > 1:
            name.append(f" ({len(entry.file.shards)} shards)", style="dim")
        if entry.file.projectors:
            name.append(" +vision", style="dim")
        return name

    def _tell_apart(self) -> None:
        """Rows whose names read the same (copies of one model in several folders, say) get what differs in
        their paths (" · backup", a folder; " · Q8_0", a file name's part); their name cells are drawn again."""
        ids = list(self.entries)
        names = [self._row_name(self.entries[i]).plain for i in ids]
        if not self._apart and len(set(names)) == len(names):
            return  # no namesakes, now or before (the labels' module is not needed to draw the first list)
        from app.tui.quant_labels import distinct_labels

        told = distinct_labels(names, [self.entries[i].file.path for i in ids])
        before, self._apart = self._apart, {i: t[len(n) :] for i, n, t in zip(ids, names, told, strict=True) if t != n}
        for key in set(before) | set(self._apart):
            if before.get(key) != self._apart.get(key) and key in self.entries and key in self.rows:
                self.update_cell(key, "name", self._cells(self.entries[key])["name"])

    def _cells(self, entry: CatalogEntry) -> dict[str, str | Text]:
        s = entry.summary
        text, kind = fit_badge(s)
        name = self._row_name(entry)
        apart = self._apart.get(entry.file.entry_id)
        if apart:  # a file or folder name: from outside
            name.append(terminal_safe(apart), style="dim")
        if s is not None and not entry.fresh:
            text += " ↻"
        return {
            "name": name,
            "arch": terminal_safe(s.architecture if s else "") or "-",
            "params": format_params(s.n_params if s else 0),
            "quant": terminal_safe(s.quantization if s else "") or "-",
            "size": Text(format_size(entry.file.size), justify="right"),
            "fit": Text(text, style=badge_style(kind, self.app.current_theme)),
            "source": entry.file.source,
        }


def first_readable(entries: list[CatalogEntry]) -> str:
    """The first model of the list that is known to read (an unreadable file is chosen only when all are)."""
    for entry in entries:
        if not entry.file.problem and not (entry.summary is not None and entry.summary.error) and _gguf(entry):
            return entry.file.entry_id
    return entries[0].file.entry_id


def _gguf(entry: CatalogEntry) -> bool:
    """Whether the file starts as a GGUF file does (four bytes read; a planned one is known already)."""
    if entry.summary is not None or entry.file.is_demo:
        return True
    try:
        with open(entry.file.path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False
