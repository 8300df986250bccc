"""The device probe, begun before Textual is imported: the picker's first list waits for it, and
Textual's import (most of a start) leaves the other core free, so it is ready by the time it is asked.

Only the first probe is taken from here (`take`); a rescan probes again."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.devices.probes import DeviceReport

_begun: Future[DeviceReport] | None = None


def begin(probe: Callable[[], DeviceReport]) -> None:
    """Run `probe` (the app's: app.tui.services.probe_for) in a thread of its own, now."""
    global _begun
    future: Future[DeviceReport] = Future()

    def run() -> None:
        try:
            future.set_result(probe())
        except BaseException as exc:  # the scan worker that takes it raises it (a malformed --vram: ValueError)
            future.set_exception(exc)

    _begun = future
    threading.Thread(target=run, name="vramchat-early-probe", daemon=True).start()


def take() -> Future[DeviceReport] | None:
    """The probe begun at start, once; None after that (or when none was begun)."""
    global _begun
    future, _begun = _begun, None
    return future
