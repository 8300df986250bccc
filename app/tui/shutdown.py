"""Ending the app when its terminal is gone (SIGHUP) or it is asked to (SIGTERM), with no way to hang.

A clean exit stops the reply, ends the engine process and puts the terminal back. When the
terminal has been closed, writing to it fails (EIO) or blocks, and a clean exit could wait on it
(or on a worker thread) forever: the app would stay alive with nobody to see it, holding its model
in memory. So a shutdown by signal gets a deadline, after which the process ends outright; its
engine process ends with it (it dies with its parent, app.children).
"""

from __future__ import annotations

import contextlib
import os
import threading


def silence_terminal() -> None:
    """Point stdout and stderr at /dev/null: the terminal they wrote to is gone."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)


def end_within(seconds: float, code: int) -> None:
    """End the process with `code` if it has not ended by itself within `seconds`."""
    timer = threading.Timer(seconds, os._exit, args=(code,))
    timer.daemon = True
    timer.start()
