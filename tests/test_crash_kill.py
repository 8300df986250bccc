"""kill -9 during a streamed reply, then restart: every sent message and the partial reply are there.

The real `vramchat MODEL` runs in a pseudo-terminal with a tiny model that never ends its
replies by itself; the test types a question, waits until the reply has been streaming
(and saved) for a moment, kills the process with SIGKILL, then starts the app again on
the same data folder and reads what a user would see.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from app.settings import Settings, save_settings
from app.store import db_path
from app.tui.screens.chat import ChatScreen
from app.tui.widgets.message_view import MessageView
from tests.tiny_models import TinySpec, write_tiny_model
from tests.tui_helpers import make_app, picker_ready, wait_for

ENDLESS = TinySpec("llama", n_layer=4, n_embd=256, n_head=4, n_head_kv=4, n_ff=512, n_ctx_train=32768,
                   never_ends=True, name="Endless tiny")
QUESTION = "Tell me everything"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal and SIGKILL")


class PtyApp:
    """`vramchat ARGS` in a 160x45 pseudo-terminal, its output drained as a terminal would."""

    def __init__(self, *args: str) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 45, 160, 0, 0))
        env = dict(os.environ, TERM="xterm-256color")
        vramchat = Path(sys.executable).with_name("vramchat")
        self.proc = subprocess.Popen([str(vramchat), *args], stdin=slave, stdout=slave, stderr=slave, env=env,
                                     close_fds=True, start_new_session=True)
        os.close(slave)
        self.master = master
        self.screen = bytearray()  # what the app wrote, escape codes and all (the last MiB)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self.master, 65536):
                self.screen += chunk
                del self.screen[:-(1 << 20)]
        except OSError:
            pass

    def shown(self, text: str) -> bool:
        return text.encode() in self.screen

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        os.close(self.master)


def _rows(db: Path) -> list[tuple[str, str, str]]:
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return [tuple(r) for r in con.execute("SELECT role, content, state FROM messages ORDER BY id")]
    except sqlite3.OperationalError:  # the schema is not there yet
        return []
    finally:
        con.close()


def _until(condition, timeout: float, what: str, every: float = 0.1, action=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if action is not None:
            action()
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


async def test_kill_during_a_streamed_reply_loses_nothing(tmp_path: Path, _private_home: Path) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    model = write_tiny_model(shelf / "endless.gguf", ENDLESS)
    save_settings(Settings(max_tokens=16000, scan_known_caches=False))
    db = db_path()

    app = PtyApp(str(model))
    try:
        _until(lambda: app.shown("loaded in"), 60, "the model to load (its notification)")
        app.type(QUESTION + "\r")
        _until(lambda: any(r[0] == "user" for r in _rows(db)), 30, "the question to be saved")
        streaming = _until(lambda: [r for r in _rows(db) if r[0] == "assistant" and r[2] == "streaming" and r[1]],
                           30, "the reply to be streaming")
        saved_before_kill = streaming[0][1]
        app.kill()
    finally:
        if app.proc.poll() is None:
            app.kill()
    assert app.proc.returncode == -signal.SIGKILL

    rows = _rows(db)
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
