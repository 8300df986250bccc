"""The hub view's opened repository: every quant with its exact fit on this machine, planned as its header
arrives, the best one marked (★) and those already on this machine (✓); the speed, context, GPU layers and
KV cache columns while the terminal has room for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import DataTable

from app.catalog import fit_badge
from app.terminal_text import terminal_safe
from app.tui.badges import badge_style
from app.tui.widgets.table_columns import Column, redraw
from planner.units import format_size

if TYPE_CHECKING:
    from app.quants import QuantRow, QuantTable
    from app.sources.model import ModelSource
    from planner.speed import SpeedPrediction

# the quants: these always, then the others while they fit, in this order
QUANT_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("mark", "", 2),
    ("quant", "Quant", 0),  # as wide as the longest quant's label
    ("size", "Size", 10),
    ("fit", "Fit on this machine", 36),
)
QUANT_OPTIONAL: tuple[tuple[str, str, int], ...] = (
    # the speed first: the figure people pick a quant by (at 80 columns it has the room the context had)
    ("speed", "tok/s", 10),  # once the speed model gives a figure (or is measuring this CPU)
    ("ctx", "Context", 9),
    ("layers", "GPU layers", 10),
    ("kv", "KV", 9),
)
FIT_MIN = 24  # the fit column's least width ("Fit on this machine" and a short badge)
BEST, ON_DISK = "★", "✓"


class HubQuants(DataTable[object]):
    def __init__(self) -> None:
        super().__init__(id="hub-quants", cursor_type="row", zebra_stripes=True)
        self.border_title = "Quants"
        self.border_subtitle = "Enter downloads · Esc back"
        self.models: list[ModelSource] = []
        self.planned: list[QuantRow | None] = []  # the models' plans, as they come
        self.best: int | None = None
        self.why = ""  # why the best is the best, or why there is none
        self.downloaded: dict[str, str] = {}  # a model's ref -> where it is on this machine
        self._columns_shown: tuple[Column, ...] = ()

    # -- what the repo holds, as it arrives -------------------------------------------------------

    def opened(self, title: str) -> None:
        """A repo opened: nothing of it known yet."""
        self.models, self.planned, self.best, self.why, self.downloaded = [], [], None, "", {}
        self.border_title = title
        self.fill()

    def listed(self, title: str, models: list[ModelSource], downloaded: dict[str, str], width: int) -> None:
        """The repo's models, none planned yet; `downloaded`: those already on this machine."""
        self.models = models
        self.planned = [None] * len(models)
        self.downloaded = downloaded
        self.lay_out(width, again=True)
        self.border_title = title

    def planned_one(self, index: int, row: QuantRow) -> None:
        self.planned[index] = row
        key = row.source.ref
        if key in self.rows:
            cells = self.cells(index)
            for column, _, _ in self._columns_shown:
                self.update_cell(key, column, cells[column])

    def planned_all(self, table: QuantTable, width: int) -> None:
        """Every model planned, the best chosen; the cursor on it, unless the user moved it."""
        self.planned = list(table.rows)
        self.best, self.why = table.best, table.why
        self.lay_out(width, again=True)  # the speed column comes with the first figure
        if self.best is not None and self.cursor_row == 0:
            self.move_cursor(row=self.best)

    def timed(self, speeds: dict[int, SpeedPrediction]) -> None:
        """Speed figures asked again (this CPU was still being measured): their cells drawn again."""
        for index, speed in speeds.items():
            row = self.planned[index] if index < len(self.planned) else None
            if row is None:
                continue
            row.speed = speed
            if row.source.ref in self.rows and any(c == "speed" for c, _, _ in self._columns_shown):  # (a narrow
                # table may leave the column out: the detail line below still says the figure)
                self.update_cell(row.source.ref, "speed", self.cells(index)["speed"])

    def measuring(self) -> dict[int, QuantRow]:
        """The planned rows whose speed reads "measuring…" (this CPU's probe was disturbed)."""
        from planner.speed import PENDING

        return {
            i: r
            for i, r in enumerate(self.planned)
            if r is not None and r.result is not None and r.speed is not None and r.speed.decode_start.basis == PENDING
        }

    def mark_downloaded(self, ref: str, path: str) -> None:
        self.downloaded[ref] = path
        if any(m.ref == ref for m in self.models):
            self.fill()  # its ✓

    # -- what is shown ------------------------------------------------------------------------------

    def lay_out(self, width: int, again: bool = False) -> None:
        """The columns that fit a terminal `width` wide (`again`: drawn again even where they are the same)."""
        room = width - 4  # a table's borders and its scrollbar
        quant_width = max([len(label) for label in self.labels()] + [8])
        columns = [(key, label, w or quant_width) for key, label, w in QUANT_COLUMNS]
        if width < 120:  # the fit column as wide as its widest badge, for the speed beside it
            fit = max([FIT_MIN] + [len(self.fit_badge(i)[0]) for i in range(len(self.models))])
            columns = [(key, label, min(w, fit) if key == "fit" else w) for key, label, w in columns]
        free = room - sum(w + 2 for _, _, w in columns)
        with_speed = any(r is not None and r.speed_cell not in ("-", "?") for r in self.planned)
        for key, label, w in QUANT_OPTIONAL:
            if key == "speed" and not with_speed:
                continue
            if free >= w + 2:
                columns.append((key, label, w))
                free -= w + 2
        layout = tuple(columns)
        if again or layout != self._columns_shown:
            self._columns_shown = layout
            self.fill()

    def fill(self) -> None:
        if not self._columns_shown:
            return
        at = self.cursor_row
        redraw(self, self._columns_shown, ((model.ref, self.cells(i), 1) for i, model in enumerate(self.models)))
        if self.models:
            self.move_cursor(row=min(at, len(self.models) - 1))

    def labels(self) -> list[str]:
        """Each quant's label, those of one quant told apart by what differs in their file names."""
        from app.tui.quant_labels import distinct_labels

        rows = [self.planned[i] if i < len(self.planned) else None for i in range(len(self.models))]
        labels = [row.label if row is not None else _label(model) for model, row in zip(self.models, rows, strict=True)]
        distinct = distinct_labels(labels, [m.files[0].name if m.files else m.ref for m in self.models])
        return [terminal_safe(label) for label in distinct]  # file names from the hub

    def fit_badge(self, index: int) -> tuple[str, str]:
        row = self.planned[index] if index < len(self.planned) else None
        return ("planning…", "pending") if row is None else fit_badge(row.summary)

    def cells(self, index: int) -> dict[str, object]:
        model = self.models[index]
        row = self.planned[index] if index < len(self.planned) else None
        mark = (BEST if index == self.best else " ") + (ON_DISK if model.ref in self.downloaded else "")
        label = self.labels()[index]
        badge, kind = self.fit_badge(index)
        cells: dict[str, object] = {
            "mark": Text(mark, style="bold"),
            "quant": Text(label, style="bold" if index == self.best else ""),
            "size": Text(format_size(model.size), justify="right"),
            "fit": Text(badge, style=badge_style(kind, self.app.current_theme)),
            "ctx": "-",
            "speed": "-",
            "layers": "-",
            "kv": "-",
        }
        if row is not None and row.result is not None:
            plan = row.result.plan
            kv = plan.resolved.type_k.name
            if plan.resolved.type_v.name != kv:
                kv += f"/{plan.resolved.type_v.name}"
            cells["ctx"] = Text(f"{plan.resolved.n_ctx:,}", justify="right")
            cells["layers"] = f"{plan.layers_on_gpu}/{plan.model.n_layer + 1}" if plan.gpus else "0 (CPU)"
            cells["kv"] = kv
            cells["speed"] = Text(row.speed_cell, justify="right")
        return cells

    def best_words(self) -> Text:
        """The line under the table: the best quant here and why, or why none is."""
        if self.best is not None:
            return Text.assemble((f"{BEST} Best here: {self.labels()[self.best]}", "bold"), f": {self.why}")
        return Text(f"✗ {self.why}", style="bold")

    def highlighted(self) -> int | None:
        """The index of the model the cursor is on."""
        if not self.models or self.row_count == 0:
            return None
        return min(max(self.cursor_row, 0), len(self.models) - 1)

    def describe(self, index: int | None) -> str:
        """The model at `index` in a line: its file, size, projector, whether it is here, its plan's headline."""
        if index is None or index >= len(self.models):
            return ""
        from app.sources.download import choose_projector

        model = self.models[index]
        parts = [f"{model.file_name}, {format_size(model.size)}"]
        if len(model.files) > 1:
            parts[0] += f" in {len(model.files)} files"
        projector = choose_projector(model)
        if projector is not None:
            parts.append(f"with {projector.file_name} ({format_size(projector.size)})")
        if model.ref in self.downloaded:
            parts.append(f"{ON_DISK} on this machine")
        row = self.planned[index] if index < len(self.planned) else None
        if row is not None and row.result is not None:
            from planner.explain import headline

            parts.append(headline(row.result.plan))
        elif row is not None and row.error:
            parts.append(f"✗ {row.error}")
        return terminal_safe(" · ".join(parts))


def _label(model: ModelSource) -> str:
    """A quant's label before its header is read: its quant (or its file's name), how many files it is."""
    quant = terminal_safe(model.quant or model.file_name)
    return f"{quant} ({len(model.files)} files)" if len(model.files) > 1 else quant
