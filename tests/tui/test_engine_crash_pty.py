"""The engine process dies mid-reply under the real app; the app stays up and carries on.

`vramchat MODEL` runs in a pseudo-terminal with a tiny model that never ends its replies
by itself (the demo's replies are over before a test can aim a signal at them). While a
reply streams, the test kills the engine process, first with SIGSEGV (what a broken
kernel does), then with SIGKILL (what the kernel's OOM killer does). Each time the app
must stay up, say what happened, keep the partial reply, reload when asked (Enter on the
dialog's Reload), and answer the next question from the new engine process. The demo's
answer after a crash and a reload is checked through the engine itself in
tests/app/test_engine_process.py.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests.support.pty_app import alive, endless_app, engine_pid, rows_of, until

pytestmark = [
    pytest.mark.llama,
    pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal and signals"),
]

QUESTION = "Tell me everything"
NEXT = "And then?"


def _assistant(db) -> list[tuple[str, str, str]]:
    return [r for r in rows_of(db) if r[0] == "assistant"]


def _streaming(db, after: int) -> list[tuple[str, str, str]]:
    return [r for r in _assistant(db)[after:] if r[2] == "streaming" and r[1]]


def test_the_app_survives_its_engine_dying_mid_reply(tmp_path: Path, _private_home: Path) -> None:
    app, db = endless_app(tmp_path)
    try:
        until(lambda: app.shown("loaded in"), 120, "the model to load")
        for sig in (signal.SIGSEGV, signal.SIGKILL):
            name = signal.Signals(sig).name
            before = len(_assistant(db))
            app.type(QUESTION + "\r")
            streaming = until(lambda b=before: _streaming(db, b), 60, "the reply to stream")
            pid = engine_pid(app)
            assert pid is not None and pid != app.proc.pid
            killed = app.mark()
            os.kill(pid, sig)
            until(lambda n=name, m=killed: app.shown_since(m, n), 30, f"the app to say the engine died of {name}")
            assert app.proc.poll() is None, "the app itself died"
            until(lambda m=killed: app.shown_since(m, "The engine stopped"), 10, "the dialog that says so")
            # the partial reply is kept, marked cut short by the engine
            cut = until(
                lambda b=before: [r for r in _assistant(db)[b:] if r[2] == "partial"],
                30,
                "the partial reply to be saved",
            )
            assert cut[0][1].startswith(streaming[0][1].strip()[:20])
            assert not alive(pid)
            app.type("\r")  # the dialog's Reload has the focus (Enter again if it came before the focus did)
            until(
                lambda p=pid: engine_pid(app) not in (None, p),
                120,
                "the reload in a new engine process",
                every=2.0,
                action=lambda: app.type("\r"),
            )
            answered = len(_assistant(db))
            # a question typed while the model still loads stays in the input: Enter again sends it
            app.type(NEXT + "\r")
            until(
                lambda a=answered: _streaming(db, a),
                60,
                "the next question's answer to stream",
                every=1.0,
                action=lambda: app.type("\r"),
            )
            app.type("\x1b")  # Esc stops it: the engine that answers is the new one, and it obeys
            replies = until(
                lambda a=answered: [r for r in _assistant(db)[a:] if r[2] == "partial"],
                30,
                "the stopped answer to be saved",
            )
            assert replies[0][1].strip()
        assert app.proc.poll() is None
        app.type("\x11")  # Ctrl+Q
        until(lambda: app.proc.poll() is not None, 30, "the app to quit")
        assert app.proc.returncode == 0
    finally:
        if app.proc.poll() is None:
            app.kill()
