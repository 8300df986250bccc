"""kill -9 during a streamed reply, then restart: every sent message and the partial reply are there.

The real `vramchat MODEL` runs in a pseudo-terminal with a tiny model that never ends its
replies by itself; the test types a question, waits until the reply has been streaming
(and saved) for a moment, kills the app's process with SIGKILL, then starts the app again on
the same data folder and reads what a user would see. The guardian process `vramchat` starts
the app under puts the terminal back and says so; the engine process ends with the app.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from app.settings import Settings
from app.tui.screens.chat import ChatScreen
from app.tui.widgets.message_view import MessageView
from tests.support.pty_app import alive, endless_app, engine_pid, rows_of, ui_pid, until
from tests.support.tui_helpers import make_app, picker_ready, wait_for

QUESTION = "Tell me everything"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal and SIGKILL")


async def test_kill_during_a_streamed_reply_loses_nothing(tmp_path: Path, _private_home: Path) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    app, db = endless_app(shelf)
    try:
        until(lambda: app.shown("loaded in"), 60, "the model to load (its notification)")
        app.type(QUESTION + "\r")
        until(lambda: any(r[0] == "user" for r in rows_of(db)), 30, "the question to be saved")
        streaming = until(
            lambda: [r for r in rows_of(db) if r[0] == "assistant" and r[2] == "streaming" and r[1]],
            30,
            "the reply to be streaming",
        )
        saved_before_kill = streaming[0][1]
        engine = engine_pid(app)
        ui = ui_pid(app)
        assert engine is not None, "llama.cpp runs in an engine process of its own"
        assert ui is not None and ui != engine
        killed = app.mark()
        os.kill(ui, signal.SIGKILL)
        until(lambda: app.proc.poll() is not None, 30, "the guardian to exit")
    finally:
        if app.proc.poll() is None:
            app.kill()
    assert app.proc.returncode == 128 + signal.SIGKILL
    assert app.shown_since(killed, "the terminal has been restored")
    assert app.shown_since(killed, "\x1b[?1049l")  # off the alternate screen
    until(lambda: not alive(engine), 10, "the engine process to end with the app")

    rows = rows_of(db)
    assert rows[0] == ("user", QUESTION, "complete")
    assert rows[1][0] == "assistant" and rows[1][1].startswith(saved_before_kill)

    # restart on the same data folder: the user is told, and the chat holds the question and the reply so far
    restarted = make_app(shelf, settings=Settings(scan_known_caches=False))
    async with restarted.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(restarted))
        assert any("cut short" in str(n.message) for n in restarted._notifications)
        await pilot.press("f2")
        await wait_for(pilot, lambda: isinstance(restarted.screen, ChatScreen))
        chat = restarted.screen
        assert isinstance(chat, ChatScreen)
        conv_id = restarted.store.conversations()[0].id
        await chat.open_conversation(conv_id)
        await pilot.pause()
        views = list(chat.query(MessageView))
        assert [v.role for v in views] == ["user", "assistant"]
        assert views[0].text == QUESTION
        assert views[1].text == rows[1][1] and views[1].text.startswith(saved_before_kill)
        assert "cut short" in views[1].note
