"""Python's cycle collector, paused while vramchat starts.

A start makes hundreds of thousands of objects that live as long as the process (modules, classes,
Textual's widgets and styles), and the collector walks them again and again as they come: a first plan
of the demo spent 6 ms of its 120 in 55 collections, `--list` of 100 new models 0.12 s of 0.67, the
picker's second start 30 ms just before its first frame (one full collection took 20). A command that
prints and exits never needs it (the same peak memory with and without, measured on both); one that runs
on (the app, -p, the servers) has it back as it begins, the app with what its start made frozen first
(kept out of every later walk: it lives as long as the app)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block, then as it was (a test's process calls main() many times)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def resume(freeze: bool = False) -> None:
    """The collector on again for a process that runs on; `freeze`: what exists now is never walked again
    (gc.freeze: the app's modules, classes and styles), once per process."""
    global _frozen
    if freeze and not _frozen:
        _frozen = True
        gc.freeze()
    gc.enable()


_frozen = False
