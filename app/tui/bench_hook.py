"""bench/startup.py's view into the app: when VRAMCHAT_BENCH_READY names a file, the app appends
"<event> <time.time()>" to it once the frame that shows the event is drawn ("listed": the model list;
"planned": every badge), and quits after the last one. Without the variable it does nothing."""

from __future__ import annotations

import os
import time

from textual.app import App

BENCH_ENV = "VRAMCHAT_BENCH_READY"


def mark(app: App, event: str, quit_after: bool = False) -> None:
    target = os.environ.get(BENCH_ENV)
    if not target:
        return

    def write() -> None:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(f"{event} {time.time():.6f}\n")
        if quit_after:
            app.exit()

    app.call_after_refresh(write)
