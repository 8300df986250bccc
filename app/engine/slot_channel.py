"""The app's side of parallel replies: many threads, one engine process, its messages routed by request.

`EngineProcess` serves one request at a time: the thread that sent it reads the answer. Parallel
replies (app/engine/slots.py in the engine process) need many threads to talk at once, so while a
`SlotChannel` is open it holds the engine (no other request runs meanwhile) and one router thread reads
every message, handing each to the request it names. A crash or a stall (the engine process's own
checks, as for one reply) reaches every request still waiting, as EngineCrashed.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from app.engine import protocol as p
from app.engine.crash import EngineCrashed
from app.engine.types import EngineError, GenerationParams, GenerationStats

if TYPE_CHECKING:
    from app.engine.process import EngineProcess

_CLOSED = "closed"  # put in a request's queue when the channel ends under it


class SlotReply:
    """One reply in a slot: its pieces as they come (`pieces`), its statistics once it ended."""

    def __init__(self, channel: SlotChannel, request: int, inbox: queue.Queue[tuple[Any, ...]]) -> None:
        self._channel, self.request, self._inbox = channel, request, inbox
        self.stats = GenerationStats()
        self.done = False

    def pieces(self) -> Iterator[str]:
        """The reply's text as it streams; a caller that stops reading cancels the reply."""
        try:
            while not self.done:
                kind, *args = self._channel.next_message(self._inbox)
                if kind == p.SLOT_PIECE:
                    self.stats.generated_tokens = args[2]
                    self.stats.logprobs.extend(args[3])
                    yield args[1]
                elif kind == p.SLOT_PREFILLED:
                    import time

                    self.stats.reused_tokens, self.stats.prompt_seconds = args[1], args[2]
                    self.stats.generation_started = time.perf_counter()
                elif kind == p.SLOT_DONE:
                    final: GenerationStats = args[1]
                    final.generation_started = self.stats.generation_started
                    self.stats, self.done = final, True
                elif kind == p.SLOT_ERROR:
                    self.done = True
                    self.stats.stopped_by = "error"
                    raise EngineError(args[1], args[2], args[3])
        finally:
            if not self.done:
                self.cancel()
                self._drain()
            self._channel.forget(self.request)

    def cancel(self) -> None:
        """Stop the reply at the engine's next step (safe from any thread)."""
        self._channel.send(p.SLOT_CANCEL, self.request)

    def _drain(self) -> None:
        try:
            while not self.done:
                kind, *args = self._channel.next_message(self._inbox)
                if kind == p.SLOT_DONE:
                    self.stats, self.done = args[1], True
                elif kind == p.SLOT_ERROR:
                    self.done = True
        except EngineError:
            self.done = True


class SlotChannel:
    """Open on a loaded EngineProcess whose context has several sequences; `close` gives the engine back."""

    def __init__(self, engine: EngineProcess) -> None:
        self._engine = engine
        self._ids = itertools.count(1)
        self._queues: dict[int, queue.Queue[tuple[Any, ...]]] = {}
        self._lock = threading.Lock()
        self._waiting: set[int] = set()  # the requests an answer is due for (replies and tokenizations)
        self.crash: EngineError | None = None
        self._closed = threading.Event()
        engine._call_lock.acquire()  # the engine is this channel's until it closes
        try:
            if not engine.loaded:
                raise EngineError("no model is loaded")
            engine.phase = "slots"
            engine._send(p.SLOTS_OPEN)
            self.n_ctx_seq: int = engine._result(engine._receive())
        except BaseException:
            engine.phase = "idle" if engine._child is not None else engine.phase
            engine._call_lock.release()
            raise
        self._router = threading.Thread(target=self._route, name="vramchat-slot-router", daemon=True)
        self._router.start()

    # -- requests (any thread) ---------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        request, inbox = self._open()
        self._waiting_for(request)
        try:
            self.send(p.SLOT_TOKENIZE, request, text, add_special, parse_special)
            kind, *args = self.next_message(inbox)
            if kind == p.SLOT_ERROR:
                raise EngineError(args[1], args[2], args[3])
            return list(args[1])
        finally:
            self.forget(request)

    def start(self, tokens: list[int], params: GenerationParams) -> SlotReply:
        """A reply to `tokens` in the next free slot (the caller sends no more than there are slots)."""
        request, inbox = self._open()
        self._waiting_for(request)
        self.send(p.SLOT_START, request, tokens, params)
        return SlotReply(self, request, inbox)

    def send(self, *message: Any) -> None:
        if self.crash is not None:
            raise self.crash
        self._engine._send(*message)

    def next_message(self, inbox: queue.Queue[tuple[Any, ...]]) -> tuple[Any, ...]:
        message = inbox.get()
        if message[0] == _CLOSED:
            raise self.crash or EngineError("the engine's parallel replies were closed")
        return message

    def _open(self) -> tuple[int, queue.Queue[tuple[Any, ...]]]:
        if self.crash is not None:
            raise self.crash
        if self._closed.is_set():
            raise EngineError("the engine's parallel replies were closed")
        request = next(self._ids)
        inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        with self._lock:
            self._queues[request] = inbox
        return request, inbox

    def forget(self, request: int) -> None:
        with self._lock:
            self._queues.pop(request, None)
            self._answered(request)

    def _waiting_for(self, request: int) -> None:
        with self._lock:
            self._waiting.add(request)
            self._engine.phase = "decode"  # while an answer is due, a silent engine counts as stalled

    def _answered(self, request: int) -> None:
        """(under the lock)"""
        self._waiting.discard(request)
        if not self._waiting:
            self._engine.phase = "slots"

    # -- the router ---------------------------------------------------------------------------------

    def _route(self) -> None:
        engine = self._engine
        try:
            while True:
                message = engine._receive()
                kind = message[0]
                if kind == p.RESULT:  # SLOTS_CLOSE answered
                    return
                if kind == p.ERROR:  # a request the engine cannot take now (never sent by this channel)
                    continue
                if kind in (p.SLOT_PIECE, p.SLOT_DONE):
                    engine._cells = message[-1]
                if kind in (p.SLOT_DONE, p.SLOT_ERROR, p.SLOT_RESULT):
                    with self._lock:
                        self._answered(message[1])
                    if kind == p.SLOT_DONE:
                        engine.last_stats = message[2]
                with self._lock:
                    inbox = self._queues.get(message[1])
                if inbox is not None:
                    inbox.put(message)
        except EngineCrashed as exc:
            self.crash = exc
        except EngineError as exc:
            self.crash = exc
        finally:
            self._closed.set()
            with self._lock:
                waiting = list(self._queues.values())
            for inbox in waiting:
                inbox.put((_CLOSED,))

    def close(self) -> None:
        """Stop the replies still running and give the engine back."""
        engine = self._engine
        try:
            if self.crash is None and not self._closed.is_set():
                engine._send(p.SLOTS_CLOSE)
            self._router.join(timeout=30)
        finally:
            engine.phase = "idle" if engine._child is not None else engine.phase
            engine._call_lock.release()
