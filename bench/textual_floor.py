"""The floor under bench/startup.py: the least a Textual app that shows the same list can take.

A bare Textual app (header, a 7-column DataTable with one row per model file, footer; no
stylesheet of its own, no devices, no plans), started the same way as vramchat by
bench/startup.py --floor: it writes the same "listed" mark as the frame with the rows is
handed to the terminal, then quits. What vramchat takes beyond this is vramchat's own.
"""

from __future__ import annotations

import os
import sys
import time

from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header

BENCH_ENV = "VRAMCHAT_BENCH_READY"


class FloorApp(App):
    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names
        self.marked = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="models", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, width in (("Model", 38), ("Arch", 10), ("Params", 6), ("Quant", 8), ("Size", 10)):
            table.add_column(label, width=width)
        table.add_column("Fit on this machine", width=35)
        table.add_column("Found in", width=12)
        for name in self.names:
            table.add_row(name, "-", "?", "-", "1.0 MiB", "CPU only · 8,192 tok", "vramchat")
        # marked as vramchat's are (app/tui/bench_hook.py): as the next frame is handed to the terminal
        display = App._display

        def displayed(screen: Screen, renderable: object) -> None:
            display(self, screen, renderable)  # type: ignore[arg-type]
            del self.__dict__["_display"]
            self._listed()

        self._display = displayed  # type: ignore[method-assign]
        self.call_after_refresh(self._listed)  # nothing left to draw: the screen is idle

    def _listed(self) -> None:
        if self.marked:
            return
        self.marked = True
        target = os.environ.get(BENCH_ENV)
        if target:
            with open(target, "a", encoding="utf-8") as handle:
                for event in ("listed", "planned"):
                    handle.write(f"{event} {time.time():.6f}\n")
        self.exit()


if __name__ == "__main__":
    folder = sys.argv[1]
    FloorApp(sorted(n for n in os.listdir(folder) if n.endswith(".gguf"))).run()
