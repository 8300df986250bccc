"""bench/startup.py's view into the app: when VRAMCHAT_BENCH_READY names a file, the app appends
"<event> <time.time()>" to it once the frame that shows the event is drawn ("listed": the model list;
"planned": every badge), and quits after the last one. Without the variable it does nothing.

Each mark is asked for by the widget that shows the event (the picker fills the list), right when
it does: a mark asked for by the app after the message has bubbled up to it would wait behind
whatever the app's queue holds by then, and be written a frame or more after the one it names."""

from __future__ import annotations

import os
import time

from textual.message_pump import MessagePump

BENCH_ENV = "VRAMCHAT_BENCH_READY"


def mark(shown_by: MessagePump, event: str, quit_after: bool = False) -> None:
    """Append `event` once the next frame `shown_by` takes part in is drawn."""
    target = os.environ.get(BENCH_ENV)
    if not target:
        return

    def write() -> None:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(f"{event} {time.time():.6f}\n")
        if quit_after:
            shown_by.app.exit()

    shown_by.call_after_refresh(write)
