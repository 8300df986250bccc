"""Blocking calls a thread worker can walk away from.

Textual waits for its thread workers when the app ends, and a worker blocked on a network read that takes
seconds (a header from a slow server, a listing that times out) would hold up quitting, or a newer search,
that long. `call_abandonable` makes the call in a daemon thread and waits for it only while the worker is
wanted: once the worker is cancelled (an exclusive worker replaced, the app quitting) it raises Abandoned
and the call ends by itself, or with the process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from textual.worker import get_current_worker

POLL = 0.1  # seconds between two looks at whether the worker is still wanted
T = TypeVar("T")


class Abandoned(Exception):
    """The worker waiting for a call was cancelled: its answer is no longer wanted."""


def call_abandonable(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in a daemon thread, waited for by the calling thread worker until it is
    cancelled (Abandoned); what `fn` raises is raised here."""
    worker = get_current_worker()
    answer: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            answer.append(fn(*args, **kwargs))
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"abandonable-{getattr(fn, '__name__', 'call')}", daemon=True).start()
    while not done.wait(POLL):
        if worker.is_cancelled:
            raise Abandoned
    if failure:
        raise failure[0]
    return answer[0]
