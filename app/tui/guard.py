"""The terminal is never left broken: the app runs under a small guardian process.

A Textual app puts the terminal in raw mode, on the alternate screen, with mouse
reporting on; it undoes that when it exits. A process killed outright (SIGKILL from
the kernel's OOM killer, say) undoes nothing. So `run_guarded` forks before the app
starts: the child runs the app, the parent only waits. If the child dies by a
signal, the parent puts the terminal back as it found it and says what happened
(chats are saved as they are written, so nothing is lost). SIGTERM and SIGHUP sent
to the guardian are passed on to the app, which then exits cleanly; one that has not ended
GUARD_GRACE seconds later is killed, so that a closed terminal never leaves the app behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable

from app.children import die_with_parent
from app.terminal_text import write_control
from app.tui.shutdown import silence_terminal

# leave the alternate screen, show the cursor, mouse reporting and bracketed paste off, colours reset
RESTORE = "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[0m"
GUARD_ENV = "VRAMCHAT_NO_GUARD"  # set to 1 to run the app without the guardian


GUARD_GRACE = 8.0  # seconds a signalled app has to end by itself before the guardian ends it


def _wait(pid: int, deadline: list[float]) -> int:
    """The app's exit status; an app that was signalled and does not end in time is killed."""
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # pragma: no cover - reaped elsewhere
            return 0
        if done:
            return status
        if deadline[0] and time.monotonic() > deadline[0]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline[0] = 0.0
        time.sleep(0.1)


def run_guarded(run: Callable[[], int]) -> int:
    """Run `run()` (the app) in a child process and restore the terminal if that child is killed."""
    if os.environ.get(GUARD_ENV) == "1" or not hasattr(os, "fork") or not sys.stdin.isatty():
        return run()
    import termios

    fd = sys.stdin.fileno()
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        return run()
    sys.stdout.flush()
    sys.stderr.flush()
    child = [0]  # the app's pid, once forked
    deadline = [0.0]  # when a signalled app must have ended (0: not signalled)

    def forward(signum: int, _frame: object) -> None:
        if signum == signal.SIGHUP:  # the terminal is gone: nothing more can be said on it
            silence_terminal()
        if not deadline[0]:
            deadline[0] = time.monotonic() + GUARD_GRACE
        if child[0]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child[0], signum)

    # before the fork: a signal that comes while the app starts is not lost (nor kills the guardian)
    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGHUP)}
    pid = os.fork()
    if pid == 0:  # the app
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        die_with_parent()
        code = 1
        try:
            code = run()
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    child[0] = pid
    if deadline[0]:  # signalled between the fork and now
        forward(signal.SIGTERM, None)
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C belongs to the app
    try:
        status = _wait(pid, deadline)
    finally:  # this process's own handlers again (a caller that goes on, and what it starts, has them)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    killed_by = os.WTERMSIG(status)
    with contextlib.suppress(termios.error, OSError):
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    try:
        name = signal.Signals(killed_by).name
    except ValueError:
        name = f"signal {killed_by}"
    with contextlib.suppress(OSError):  # a terminal that was closed takes no more words
        write_control(sys.stdout, RESTORE + "\n")
        sys.stdout.write(
            f"vramchat was stopped by {name}; the terminal has been restored. Your chats are saved: "
            "run vramchat again to carry on.\n"
        )
        sys.stdout.flush()
    return 128 + killed_by
