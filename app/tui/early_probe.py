"""The device probe, begun before Textual is imported: the picker's first list waits for it, and
Textual's import (most of a start) leaves the other core free, so it is ready by the time it is asked.

Only the first probe is taken from here (`take`); a rescan probes again."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.devices.probes import DeviceReport


class ProbeOptions(Protocol):
    """What the command line asked of the devices (the app's options have it)."""

    @property
    def vram(self) -> str | None: ...
    @property
    def ram(self) -> str | None: ...
    @property
    def cpu(self) -> bool: ...
    @property
    def gpu(self) -> Sequence[str]: ...


_begun: Future[DeviceReport] | None = None


def begin(options: ProbeOptions) -> None:
    """Probe the devices `options` ask for in a thread of its own, now."""
    global _begun
    future: Future[DeviceReport] = Future()

    def probe() -> None:
        try:
            from app.devices import probe_devices

            future.set_result(probe_devices(options.vram, options.ram, cpu_only=options.cpu, gpu=options.gpu))
        except BaseException as exc:  # the scan worker that takes it raises it (a malformed --vram: ValueError)
            future.set_exception(exc)

    _begun = future
    threading.Thread(target=probe, name="vramchat-early-probe", daemon=True).start()


def take() -> Future[DeviceReport] | None:
    """The probe begun at start, once; None after that (or when none was begun)."""
    global _begun
    future, _begun = _begun, None
    return future
