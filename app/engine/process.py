"""The engine, one process away: llama.cpp runs in a child process that the app talks to over a socket.

`EngineProcess` offers what `app.engine.Engine` offers (load with progress and
cancel, streamed generation, stop at once, tokenize, KV cells in use, the buffer
sizes llama.cpp logged), so `ModelSession` does not care where llama.cpp runs.
A native crash, an abort, or the kernel's OOM killer ends the child, not the app:
the call in progress raises `EngineCrashed` with what happened in words, and the
next load starts a new child. Unloading ends the child, so every byte of device
memory, driver context included, goes back.

One worker thread drives it at a time (as the app does); `stop()` is safe from
any thread, and `kv_cells_used()` reads a figure the child sends with every piece.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

from app.children import child_env
from app.engine import protocol as p
from app.engine.crash import EngineCrashed, EngineExit, oom_kills
from app.engine.dry_run import DryRun
from app.engine.types import (
    EngineError,
    GenerationParams,
    GenerationStats,
    LoadReport,
    MediaEncoded,
    MediaPrompt,
    ProjectorLoad,
    Prompt,
    PromptProgress,
    PromptWatcher,
    ResizeReport,
)
from app.native import IN_PROCESS_ENV
from planner.config import LoadConfig

STOP_GRACE = 5.0  # seconds a stopped request may take before the child is killed
EXIT_GRACE = 10.0  # seconds an unload waits for the child to exit by itself
START_TIMEOUT = 120.0  # seconds for a new child to import llama.cpp and say it is ready
_CPU_BUFFERS = ("CPU", "CPU_Mapped")


BUSY_CPU_SECONDS = 1.0  # CPU time an engine spends in a stall window that shows it is working, not stopped


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time a process (all its threads) has used, or None where it cannot be read."""
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return None
    return float(times.user + times.system)


class _Child:
    """One engine process: the socket, the process, and the last lines of its stderr."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        parent, child = socket.socketpair()
        # the engine is where llama.cpp's backends belong
        environ = child_env(env, PYTHONUNBUFFERED="1", **{IN_PROCESS_ENV: "1"})
        self.oom_kills_before = oom_kills()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.engine.child", str(child.fileno())],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=environ,
            start_new_session=True,
        )
        child.close()
        self.conn = Connection(os.dup(parent.fileno()))
        parent.close()
        self.lines: collections.deque[str] = collections.deque(maxlen=200)
        self._reader = threading.Thread(target=self._read_stderr, name="vramchat-engine-stderr", daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.append(raw.decode("utf-8", errors="replace").rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_info(self, phase: str, extra_buffers: tuple[str, ...]) -> EngineExit:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # the socket broke but the process lives on: end it
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(timeout=2)
        after = oom_kills()
        oom = self.oom_kills_before >= 0 and after > self.oom_kills_before
        return EngineExit(code, phase, tuple(self.lines), oom, extra_buffers)

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        self.conn.close()


class _Resend(Exception):
    """The child lacked a picture the request named by key: the request goes again, with its bytes."""


class EngineProcess:
    """llama.cpp in a child process, behind the engine protocol `ModelSession` uses."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = env
        self._child: _Child | None = None
        self._send_lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._stop_requested = 0.0  # time.monotonic() of a stop not yet answered, else 0
        self._cells = 0
        self.phase = "idle"
        self.report: LoadReport | None = None
        self.last_stats = GenerationStats()
        self.last_exit: EngineExit | None = None
        self.generating = threading.Event()
        self._special: dict[str, str] = {}
        self.resizable = True  # the child carries the conversation over to a context of a new size
        # a reply (prefill or decode) that gets no message from the child for this long is stalled: the
        # process was stopped (SIGSTOP), a driver hung, or an RPC server went quiet (app/engine/stall.py)
        self.stall_timeout: float | None = None
        self.stall_on_rpc = False  # the model uses RPC devices: a stall is blamed on a server
        self._stalled = False
        self._silent_for = 0.0  # how long a stalled reply went without a word
        self._stop_ignored = False
        # while an image of the prompt is encoded: (its place, how many); the images encoded so far
        self.encoding: tuple[int, int] | None = None
        self.encoded: list[MediaEncoded] = []
        self.on_media_encoded: Callable[[MediaEncoded], None] | None = None
        # the pictures the child keeps (Media.key): a prompt carries those by key alone (app/engine/media_cache.py)
        self.in_child: set[tuple[str, str, int, int]] = set()

    # -- the child --------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None and self._child.alive() else None

    @property
    def loaded(self) -> bool:
        return self.report is not None and self._child is not None and self._child.alive()

    def exit_while_idle(self) -> EngineExit | None:
        """How the engine process ended, when it ended between requests (killed, crashed, the OOM
        killer) while a model was loaded; told once. None while it lives, when nothing was loaded, or
        while a request runs (that request reports the end itself)."""
        child = self._child
        if child is None or self.report is None or child.alive():
            return None
        if not self._call_lock.acquire(blocking=False):
            return None
        try:
            if self._child is not child:
                return None
            try:
                self._crashed()
            except EngineCrashed as exc:
                return exc.exit
            return None  # pragma: no cover - _crashed always raises
        finally:
            self._call_lock.release()

    def _send(self, *message: Any) -> None:
        child = self._child
        if child is None:
            raise EngineError("no model is loaded")
        with self._send_lock, contextlib.suppress(OSError):  # a dead child: the next receive says how
            child.conn.send(message)

    def _receive(self) -> tuple[Any, ...]:
        """The child's next message; a dead child raises EngineCrashed, a stop it ignores kills it."""
        child = self._child
        assert child is not None
        waiting_since = silent_since = time.monotonic()
        cpu_since: float | None = None  # the engine's CPU time when a silence first reached the limit
        while True:
            try:
                if child.conn.poll(0.25):
                    return child.conn.recv()
            except (EOFError, OSError):
                self._crashed()
            if not child.alive() and not child.conn.poll(0):
                self._crashed()
            if self._stop_requested and time.monotonic() - self._stop_requested > STOP_GRACE:
                self._stop_ignored = True
                child.kill()  # it did not stop: ending it is the only stop left
                self._crashed()
            stall = self.stall_timeout
            # a reply, or a tokenization (instant unless the engine was stopped); an image may take long
            replying = self.phase in ("prefill", "decode", "tokenize") and self.encoding is None
            if stall and replying and time.monotonic() - waiting_since > stall:
                cpu = _cpu_seconds(child.pid)
                if cpu is not None and (cpu_since is None or cpu - cpu_since > BUSY_CPU_SECONDS):
                    # silent for the limit: watched for as long again; an engine that works meanwhile (a first
                    # reply compiling a GPU's pipelines, a slow batch) is not stalled, a stopped one is
                    waiting_since, cpu_since = time.monotonic(), cpu
                    continue
                self._stalled, self._silent_for = True, time.monotonic() - silent_since
                child.kill()  # blocked on a server that no longer answers: only ending it frees the reply
                self._crashed()

    def _crashed(self) -> None:
        child = self._child
        assert child is not None
        extra = tuple(
            n
            for n in (self.report.measurements.model if self.report else {})
            if (n.startswith("CPU") and n not in _CPU_BUFFERS) or n == "AMX"
        )
        info = child.exit_info(self.phase, extra)
        if self._stalled:
            info = dataclasses.replace(
                info, stalled_seconds=self.stall_timeout or 0.0, stalled_on_rpc=self.stall_on_rpc
            )
        elif self._stop_ignored:
            info = dataclasses.replace(info, stop_ignored=STOP_GRACE)
        self._stalled = self._stop_ignored = False
        child.conn.close()
        self._child = None
        self.report = None
        self._cells = 0
        self.last_exit = info
        self.phase = "idle"
        raise EngineCrashed(info)

    def _start(self) -> None:
        self.phase = "starting"
        self._child = _Child(self._env)
        self.in_child = set()  # a new child keeps no picture: each is sent with its bytes again
        deadline = time.monotonic() + START_TIMEOUT
        child = self._child
        while not child.conn.poll(0.25):
            if not child.alive() or time.monotonic() > deadline:
                if child.alive():
                    child.kill()
                self._crashed()
        kind, _pid = self._receive()
        if kind != p.READY:
            raise EngineError(f"the engine process started badly: {kind}")

    def _call(self, phase: str, *request: Any) -> Any:
        """One request, one answer (RESULT or ERROR)."""
        with self._call_lock:
            if self._child is None:
                raise EngineError("no model is loaded")
            self.phase = phase
            try:
                self._send(*request)
                message = self._receive()
            finally:
                self.phase = "idle" if self._child is not None else self.phase
            return self._result(message)

    def _wire(self, prompt: Prompt) -> Prompt:
        """The prompt as it crosses the socket: the pictures the child keeps by key alone, the others
        with their bytes (read now when the caller gave only a way to read them)."""
        if not isinstance(prompt, MediaPrompt):
            return prompt
        media = tuple(m.sent(with_data=m.key not in self.in_child) for m in prompt.media)
        self.in_child.update(m.key for m in media)
        return MediaPrompt(prompt.text, media)

    def _missing(self, keys: list[tuple[str, str, int, int]]) -> None:
        """The child no longer keeps these pictures (it let them go for newer ones): send their bytes."""
        self.in_child.difference_update(keys)

    def _result(self, message: tuple[Any, ...]) -> Any:
        kind, *args = message
        if kind == p.MISSING_MEDIA:
            self._missing(args[0])
            raise _Resend
        if kind == p.ERROR:
            text, log, status = args
            raise EngineError(text, log, status)
        if kind != p.RESULT:
            raise EngineError(f"the engine answered {kind!r} out of turn")
        return args[0]

    # -- lifecycle --------------------------------------------------------------------------

    def load(
        self,
        path: str | os.PathLike[str],
        config: LoadConfig,
        progress: Callable[[float], bool | None] | None = None,
        projector: ProjectorLoad | None = None,
    ) -> LoadReport:
        """Load the model (and the projector, when one is given) in the engine process (a new one, or the
        one a dry run started); `progress(fraction)` returning False cancels."""
        if self.report is not None:
            self.unload()
        with self._call_lock:
            self._stop_requested = 0.0
            if self._child is None or not self._child.alive():
                self._start()
            self.phase = "loading"
            self._send(p.LOAD, os.fspath(path), config, projector)
            try:
                while True:
                    kind, *args = self._receive()
                    if kind == p.PROGRESS:
                        if progress is not None and progress(args[0]) is False and not self._stop_requested:
                            self.stop()
                    elif kind == p.LOADED:
                        if self._stop_requested:  # the load ended before the cancel reached it: undo it
                            raise EngineError("loading was cancelled")
                        self.report = args[0]
                        self._cells = 0
                        self._special = {}
                        return self.report
                    elif kind == p.ERROR:
                        text, log, status = args
                        raise EngineError(text, log, status)
            except EngineError:
                if not isinstance(sys.exc_info()[1], EngineCrashed):
                    self._end_child()
                raise
            finally:
                self._stop_requested = 0.0
                self.phase = "idle"

    def unload(self) -> None:
        """End the child: the model, its context and every device buffer go with it."""
        self.report = None
        self._cells = 0
        self._end_child()

    def _end_child(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.alive():
            try:
                with self._send_lock:
                    child.conn.send((p.EXIT,))
                child.proc.wait(timeout=EXIT_GRACE)
            except (OSError, subprocess.TimeoutExpired):
                pass
        child.kill()

    def close(self) -> None:
        self.stop()
        self.unload()

    # -- requests ---------------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return self._call("tokenize", p.TOKENIZE, text, add_special, parse_special)

    def tokenize_media(self, prompt: MediaPrompt) -> list[int]:
        """The cells a prompt with images takes (each image as many as the projector makes of it)."""
        try:
            return self._call("tokenize", p.TOKENIZE_MEDIA, self._wire(prompt))
        except _Resend:
            return self._call("tokenize", p.TOKENIZE_MEDIA, self._wire(prompt))

    def special_text(self, which: str) -> str:
        if which not in self._special:
            self._special[which] = self._call("tokenize", p.SPECIAL_TEXT, which)
        return self._special[which]

    def dry_run(self, path: str | os.PathLike[str], config: LoadConfig) -> DryRun:
        """llama.cpp's own sizes for `config` (a no_alloc load), in the engine process: the one that
        runs, or a new one that the next load then uses."""
        with self._call_lock:
            if self._child is None or not self._child.alive():
                self._start()
        return self._call("dry_run", p.DRY_RUN, os.fspath(path), config)

    def resize(self, n_ctx: int, keep: bool = True) -> ResizeReport:
        """Grow or shrink the context, the conversation carried over (see Engine.resize)."""
        resized, report, self._cells, failure = self._call("resize", p.RESIZE, n_ctx, keep)
        self.report = report
        if failure is not None:
            raise EngineError(failure[0], failure[1])
        return resized

    def kv_cells_used(self) -> int:
        return self._cells

    @property
    def n_ctx(self) -> int:
        return self.report.n_ctx if self.report else 0

    def stop(self) -> None:
        """Stop the load or reply in progress as soon as possible; safe from any thread."""
        if self._child is None or not self._child.alive():
            return
        if self.phase in ("loading", "prefill", "decode") and not self._stop_requested:
            self._stop_requested = time.monotonic()
        self._send(p.STOP)

    def generate(
        self, prompt: Prompt, params: GenerationParams | None = None, progress: PromptWatcher | None = None
    ) -> Iterator[str]:
        """Stream the reply's pieces as the child writes them; `last_stats` follows along (and
        `encoding`, while an image of the prompt goes through the projector). `progress` is told
        what the child says while it reads the prompt, as it says it."""
        params = params or GenerationParams()

        def reading() -> None:
            now = stats.reading_prompt()
            if progress is not None and now is not None:
                progress(PromptProgress(*now))

        with self._call_lock:
            if not self.loaded:
                raise EngineError("no model is loaded")
            stats = GenerationStats(prompt_tokens=len(prompt) if isinstance(prompt, list) else 0)
            stats.prompt_started = time.perf_counter()
            self.last_stats = stats
            self._stop_requested = 0.0
            self.phase = "prefill"
            self.generating.set()
            self._send(p.GENERATE, self._wire(prompt), params)
            finished = False
            try:
                while True:
                    kind, *args = self._receive()
                    if kind == p.PIECE:
                        text, stats.generated_tokens, entries, self._cells = args
                        stats.logprobs.extend(entries)
                        yield text
                    elif kind == p.MISSING_MEDIA:
                        self._missing(args[0])
                        self._send(p.GENERATE, self._wire(prompt), params)
                    elif kind == p.PREFILLING:
                        stats.prompt_read, total, self._cells = args  # the cells: what the cache kept and read
                        stats.reused_tokens = max(self._cells - stats.prompt_read, 0)
                        stats.prompt_tokens = stats.reused_tokens + total  # a prompt with images too
                        reading()
                    elif kind == p.ENCODING:
                        self.encoding = (args[0], args[1])
                        if progress is not None:
                            progress(PromptProgress(picture=self.encoding))
                    elif kind == p.ENCODED:
                        event, weights, compute = args
                        self.encoding = None
                        self._media_encoded(event, weights, compute)
                        reading()
                    elif kind == p.PREFILLED:
                        stats.reused_tokens, stats.prompt_seconds, self._cells = args
                        stats.generation_started = time.perf_counter()
                        self.phase = "decode"
                    elif kind == p.DONE:
                        final, self._cells = args
                        final.generation_started = stats.generation_started
                        self.last_stats = final
                        finished = True
                        return
                    elif kind == p.ERROR:
                        finished = True
                        text, log, status = args
                        stats.stopped_by = "error"
                        raise EngineError(text, log, status)
            finally:
                self.encoding = None
                if not finished and self._child is not None:
                    self._drain()  # the caller stopped reading: stop the child and wait for its end
                self._stop_requested = 0.0
                self.generating.clear()
                if self._child is not None:
                    self.phase = "idle"

    def _media_encoded(self, event: MediaEncoded, weights: dict[str, int], compute: dict[str, int]) -> None:
        """An image went through the projector: its buffers now (exact), and the news for whoever listens."""
        if self.report is not None:
            m = self.report.measurements
            m.projector_weights, m.projector_compute = weights, compute
        self.encoded.append(event)
        if self.on_media_encoded is not None:
            self.on_media_encoded(event)

    def _drain(self) -> None:
        self.stop()
        try:
            while True:
                kind, *args = self._receive()
                if kind == p.DONE:
                    self.last_stats, self._cells = args
                    return
                if kind == p.ERROR:
                    return
        except EngineCrashed:
            return
