"""A closed terminal (SIGHUP) ends the app, its guardian and its engine: nothing stays behind.

The real `vramchat MODEL` runs in a pseudo-terminal that is its controlling terminal, as a terminal
window's is; closing it makes the kernel hang up the session. Once in eleven closes an earlier
vramchat stayed alive with its terminal gone (the app and its guardian), holding its model.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.support.pty_app import alive, endless_app, engine_pid, rows_of, ui_pid, until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a Linux pseudo-terminal")

ENDED_WITHIN = 12.0  # seconds: the app's own deadline is 5 s, the guardian's 8 s


@pytest.mark.parametrize("when", ["idle", "mid-reply"])
def test_closing_the_terminal_ends_the_app_its_guardian_and_its_engine(
    tmp_path: Path, _private_home: Path, when: str
) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    app, db = endless_app(shelf, controlling_terminal=True)
    try:
        until(lambda: app.shown("loaded in"), 60, "the model to load (its notification)")
        if when == "mid-reply":
            app.type("Tell me everything\r")
            until(
                lambda: [r for r in rows_of(db) if r[0] == "assistant" and r[2] == "streaming" and r[1]],
                30,
                "the reply to be streaming",
            )
        tree = [
            app.proc.pid,
            until(lambda: ui_pid(app), 10, "the app's pid"),
            until(lambda: engine_pid(app), 10, "the engine"),
        ]
        app.hang_up()
        start = time.monotonic()
        until(lambda: not any(alive(pid) for pid in tree), ENDED_WITHIN, "every process to end after the hang-up")
        assert time.monotonic() - start < ENDED_WITHIN
        if when == "mid-reply":  # what was written is kept, marked as cut short
            assert any(r[0] == "assistant" and r[1] for r in rows_of(db))
    finally:
        if app.proc.poll() is None:
            app.kill()
