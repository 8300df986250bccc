"""The real `vramchat` in a pseudo-terminal, for tests that kill processes under it."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

_ESCAPES = re.compile(rb"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>])")


class PtyApp:
    """`vramchat ARGS` in a 160x45 pseudo-terminal, its output drained as a terminal would."""

    def __init__(self, *args: str, controlling_terminal: bool = False) -> None:
        """`controlling_terminal`: the pty is the app's controlling terminal, as a terminal window's is:
        closing it (`hang_up`) makes the kernel send SIGHUP, as closing the window does."""
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 45, 160, 0, 0))
        env = dict(os.environ, TERM="xterm-256color")
        vramchat = Path(sys.executable).with_name("vramchat")
        self.proc = subprocess.Popen(
            [str(vramchat), *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
            **({"preexec_fn": _take_terminal} if controlling_terminal else {"start_new_session": True}),
        )
        os.close(slave)
        self.master = master
        self.screen = bytearray()  # what the app wrote, escape codes and all (the last MiB)
        self.written = 0  # bytes the app wrote since it started
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self.master, 65536):
                self.screen += chunk
                self.written += len(chunk)
                del self.screen[: -(1 << 20)]
        except OSError:
            pass

    def shown(self, text: str) -> bool:
        """Whether the app drew `text` (within the last MiB kept), blanks and escape codes left out:
        Textual redraws only the cells that changed, so a line that replaced a similar one can
        arrive in pieces ("loaded in" as "loaded", a cursor move, "in")."""
        return self.shown_since_in_words(0, text)

    def mark(self) -> int:
        """A point in the output, for `shown_since`."""
        return self.written

    def shown_since(self, mark: int, text: str) -> bool:
        """Whether `text` was written after `mark` (within the last MiB kept)."""
        new = self.written - mark
        return new > 0 and text.encode() in self.screen[-new:]

    def shown_since_in_words(self, mark: int, text: str) -> bool:
        """Like `shown_since`, for text Textual may draw in pieces (a toast's words between cursor moves):
        escape sequences and blanks are left out on both sides."""
        new = min(self.written - mark, len(self.screen))
        if new <= 0:
            return False
        drawn = _ESCAPES.sub(b"", bytes(self.screen[-new:]))
        return re.sub(rb"\s+", b"", text.encode()) in re.sub(rb"\s+", b"", drawn)

    def last_words(self, chars: int = 2000) -> str:
        """The end of what the app drew, escape codes out and blanks squeezed (for a failure's message)."""
        drawn = _ESCAPES.sub(b" ", bytes(self.screen[-8 * chars :])).decode(errors="replace")
        return re.sub(r"\s+", " ", drawn)[-chars:]

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def hang_up(self) -> None:
        """Close the terminal, as closing its window does."""
        os.close(self.master)
        self.master = -1

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        if self.master >= 0:
            os.close(self.master)


def _take_terminal() -> None:
    """In the child before exec: a session of its own whose controlling terminal is its stdin."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def rows_of(db: Path) -> list[tuple[str, str, str]]:
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return [tuple(r) for r in con.execute("SELECT role, content, state FROM messages ORDER BY id")]
    except sqlite3.OperationalError:  # the schema is not there yet
        return []
    finally:
        con.close()


def until(condition, timeout: float, what: str, every: float = 0.1, action=None, app: PtyApp | None = None):
    """Wait for `condition()`; a timeout fails with `what`, and with the last words `app` drew."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if action is not None:
            action()
        time.sleep(every)
    shown = f"; the app drew last: {app.last_words()}" if app is not None else ""
    raise AssertionError(f"timed out waiting for {what}{shown}")


def engine_pid(app: PtyApp) -> int | None:
    """The pid of the app's engine process (`python -m app.engine.child`), if one runs."""
    import psutil

    try:
        children = psutil.Process(app.proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    for child in children:
        try:
            if "app.engine.child" in " ".join(child.cmdline()):
                return child.pid
        except psutil.Error:
            continue
    return None


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie does not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def ui_pid(app: PtyApp) -> int | None:
    """The pid of the Textual app itself: the child of the guardian process `vramchat` starts."""
    import psutil

    try:
        children = psutil.Process(app.proc.pid).children()
    except psutil.NoSuchProcess:
        return None
    return next((c.pid for c in children if "app.engine.child" not in " ".join(c.cmdline())), None)


def endless_app(folder: Path, controlling_terminal: bool = False) -> tuple[PtyApp, Path]:
    """`vramchat` on a tiny model that never ends its replies (max tokens 16,000), and the chats' database."""
    from app.settings import Settings, save_settings
    from app.store import db_path
    from tests.support.tiny import ENDLESS, write_tiny_model

    model = write_tiny_model(folder / "endless.gguf", ENDLESS)
    save_settings(Settings(max_tokens=16000, scan_known_caches=False))
    return PtyApp(str(model), controlling_terminal=controlling_terminal), db_path()
