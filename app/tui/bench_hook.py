"""bench/startup.py's view into the app: when VRAMCHAT_BENCH_READY names a file, the app appends
"<event> <time.time()>" to it once the frame that shows the event is drawn ("listed": the model list;
"planned": every badge), and quits after the last one. Without the variable it does nothing.

Each mark is asked for by the widget that shows the event (the picker fills the list), right when
it does, and written as the screen's next frame is handed to the terminal (or, where nothing is left
to draw, once the screen is idle). A mark written by an after-refresh callback instead would wait
behind the callbacks queued before it (the footer composing its keys, 20 ms here), which a bare Textual
app's mark (bench/textual_floor.py) does not, and name a time after the frame it means."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from textual.app import App
from textual.message_pump import MessagePump
from textual.screen import Screen

BENCH_ENV = "VRAMCHAT_BENCH_READY"
FRAME = "_display"  # Textual's App method that hands a screen's frame to the terminal (8.x)


def mark(shown_by: MessagePump, event: str, quit_after: bool = False) -> None:
    """Append `event` once the next frame `shown_by` takes part in is drawn."""
    target = os.environ.get(BENCH_ENV)
    if not target:
        return
    written = False

    def write() -> None:
        nonlocal written
        if written:
            return
        written = True
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(f"{event} {time.time():.6f}\n")
        if quit_after:
            shown_by.app.exit()

    after_next_frame(shown_by.app, shown_by if isinstance(shown_by, Screen) else shown_by.app.screen, write)
    shown_by.call_after_refresh(write)  # nothing left to draw: no frame comes, the screen is idle


def after_next_frame(app: App, screen: Screen, then: Callable[[], None]) -> None:
    """`then()` right after `app` next hands a frame of `screen` to the terminal (no-op where Textual has no
    such step). Watched on the app's own method, which every frame goes through however it was asked for."""
    display = getattr(type(app), FRAME, None)
    if display is None:
        return
    waiting: list[tuple[Screen, Callable[[], None]]] = app.__dict__.setdefault("_bench_after_frame", [])
    waiting.append((screen, then))
    if FRAME in app.__dict__:
        return  # already watched

    def displayed(shown: Screen, renderable: object) -> None:
        display(app, shown, renderable)
        due = [entry for entry in waiting if entry[0] is shown]
        for entry in due:
            waiting.remove(entry)
        if not waiting:
            del app.__dict__[FRAME]  # the class's own again
        for _, callback in due:
            callback()

    setattr(app, FRAME, displayed)
