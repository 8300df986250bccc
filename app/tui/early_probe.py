"""The device probe, begun before Textual is imported: the picker's first list waits for it.

On Linux the probe runs in a process of its own, forked before Textual's import: its imports (the probes,
ctypes, NVML's bindings) and its reads run on another core instead of taking turns with Textual's import
for the interpreter's lock, and the app reads back only the report (app.devices.probes, without a probe).
Where there is no fork, or other threads already run, or the probe process ends without a report (a
crash in a driver, a report that cannot be sent), the probe runs in a thread of this process, as it
always could.

Only the first probe is taken from here (`take`); a rescan probes again."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from app.devices.probes import DeviceReport

_begun: Future[DeviceReport] | None = None

ProbeCall = Callable[[], "DeviceReport"]


def begin(probe: ProbeCall) -> None:
    """Run `probe` (the app's: app.tui.services.probe_for) now, beside what the app does next."""
    global _begun
    future: Future[DeviceReport] = Future()
    _begun = future
    child = _fork(probe) if _may_fork() else None
    target = (
        partial(_settle_here, future, probe) if child is None else partial(_settle_from_child, future, probe, *child)
    )
    threading.Thread(target=target, name="vramchat-early-probe", daemon=True).start()


def take() -> Future[DeviceReport] | None:
    """The probe begun at start, once; None after that (or when none was begun)."""
    global _begun
    future, _begun = _begun, None
    return future


def _may_fork() -> bool:
    """Linux, with no other thread running (a fork copies only the calling thread: a lock another thread
    held would stay held in the child). Elsewhere (macOS's frameworks are not safe across a fork) a thread."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1


def _settle_here(future: Future[DeviceReport], probe: ProbeCall) -> None:
    try:
        future.set_result(probe())
    except BaseException as exc:  # the scan worker that takes it raises it (a malformed --vram: ValueError)
        future.set_exception(exc)


def _fork(probe: ProbeCall) -> tuple[int, int] | None:
    """The probe's process and the pipe its report comes back on; None where a fork cannot be made."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:
        _probe_in_child(probe, read_end, write_end)
    os.close(write_end)
    return pid, read_end


def _probe_in_child(probe: ProbeCall, read_end: int, write_end: int) -> NoReturn:
    """The forked process: probe, send the report (or the error the probe raised) pickled, end. It never
    writes on the terminal (Textual owns it by then), never runs the app's exit handlers, and ends with
    the app should the app be killed first."""
    try:
        os.close(read_end)
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(quiet, fd)
        from app.children import die_with_parent

        die_with_parent()
        import pickle

        try:
            answer: tuple[str, object] = ("report", probe())
        except Exception as exc:
            answer = ("error", exc)
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
    finally:
        os._exit(0)


def _settle_from_child(future: Future[DeviceReport], probe: ProbeCall, pid: int, pipe: int) -> None:
    """The child's report or error; a child that ended without one has the probe run here instead."""
    try:
        with os.fdopen(pipe, "rb") as source:
            data = source.read()
    except OSError:
        data = b""
    finally:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
    answer = _unpickled(data)
    if answer is None:
        _settle_here(future, probe)
    elif isinstance(answer, BaseException):
        future.set_exception(answer)
    else:
        future.set_result(answer)


def _unpickled(data: bytes) -> DeviceReport | BaseException | None:
    """The report or the error our own probe process sent; None for nothing, or a part of it (it died
    mid-way), or anything else."""
    if not data:
        return None
    import pickle

    from app.devices.probes import DeviceReport

    try:
        kind, value = pickle.loads(data)  # from the process this one forked a moment ago
    except Exception:
        return None
    if (kind == "report" and isinstance(value, DeviceReport)) or (kind == "error" and isinstance(value, Exception)):
        return value
    return None
