"""What vramchat's own child processes share: an environment that finds this package, and an end
tied to their parent's (the engine, the device probe and the guarded app)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])  # the folder that holds the app and planner packages


def child_env(base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment for `python -m app....`: this checkout first on PYTHONPATH, plus `extra`."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def die_with_parent() -> None:
    """Linux: have the kernel end this process when its parent dies, even by SIGKILL."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
