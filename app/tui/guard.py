"""The terminal is never left broken: the app runs under a small guardian process.

A Textual app puts the terminal in raw mode, on the alternate screen, with mouse
reporting on; it undoes that when it exits. A process killed outright (SIGKILL from
the kernel's OOM killer, say) undoes nothing. So `run_guarded` forks before the app
starts: the child runs the app, the parent only waits. If the child dies by a
signal, the parent puts the terminal back as it found it and says what happened
(chats are saved as they are written, so nothing is lost). SIGTERM and SIGHUP sent
to the guardian are passed on to the app, which then exits cleanly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable

from app.children import die_with_parent

# leave the alternate screen, show the cursor, mouse reporting and bracketed paste off, colours reset
RESTORE = "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[0m"
GUARD_ENV = "VRAMCHAT_NO_GUARD"  # set to 1 to run the app without the guardian


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
    pid = os.fork()
    if pid == 0:  # the app
        die_with_parent()
        code = 1
        try:
            code = run()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C belongs to the app
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    sig = os.WTERMSIG(status)
    with contextlib.suppress(termios.error, OSError):
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    sys.stdout.write(RESTORE + "\n")
    sys.stdout.write(
        f"vramchat was stopped by {name}; the terminal has been restored. Your chats are saved: "
        "run vramchat again to carry on.\n"
    )
    sys.stdout.flush()
    return 128 + sig
