"""The server's live state, for the dashboard, /metrics and the request log: who is being answered, who
waits, how fast each reply goes, what was served. Written by the server's event loop and its worker
threads, read by the app's UI timer and /metrics: every change and every read holds one lock."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace

RECENT = 50  # finished requests kept for the dashboard


@dataclass
class Running:
    """A request being answered (or waiting for its turn)."""

    id: int
    endpoint: str
    client: str
    started: float  # time.monotonic()
    waiting: bool = True  # in the queue, not yet on the engine
    prompt_tokens: int = 0
    tokens: int = 0
    first_token: float = 0.0  # time.monotonic() of the first piece

    def tokens_per_second(self, now: float) -> float:
        if not self.first_token or self.tokens < 2:
            return 0.0
        elapsed = now - self.first_token
        return (self.tokens - 1) / elapsed if elapsed > 0 else 0.0

    @property
    def cells(self) -> int:
        """The KV cells this request's sequence holds (its prompt and its reply so far)."""
        return self.prompt_tokens + self.tokens


@dataclass(frozen=True)
class Finished:
    id: int
    endpoint: str
    ended: float  # time.time()
    status: int
    prompt_tokens: int
    tokens: int
    seconds: float
    tokens_per_second: float
    first_token_seconds: float
    stopped_by: str = ""


@dataclass
class Totals:
    requests: Counter[tuple[str, int]] = field(default_factory=Counter)  # (endpoint, status) -> count
    prompt_tokens: int = 0
    completion_tokens: int = 0
    disconnects: int = 0
    refused_busy: int = 0


class Monitor:
    def __init__(self, slots: int = 1) -> None:
        self.slots = slots
        self.address = ""
        self.started = time.time()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._running: dict[int, Running] = {}
        self._recent: deque[Finished] = deque(maxlen=RECENT)
        self._totals = Totals()
        self.notes: deque[str] = deque(maxlen=20)

    # -- writers ---------------------------------------------------------------------------------

    def begin(self, endpoint: str, client: str) -> int:
        with self._lock:
            request = next(self._ids)
            self._running[request] = Running(request, endpoint, client, time.monotonic())
            return request

    def on_engine(self, request: int, prompt_tokens: int) -> None:
        with self._lock:
            r = self._running.get(request)
            if r is not None:
                r.waiting, r.prompt_tokens = False, prompt_tokens

    def piece(self, request: int, tokens: int) -> None:
        with self._lock:
            r = self._running.get(request)
            if r is not None:
                if not r.first_token:
                    r.first_token = time.monotonic()
                r.tokens = max(r.tokens, tokens)

    def end(
        self, request: int, status: int, prompt_tokens: int = 0, tokens: int = 0, stopped_by: str = ""
    ) -> Finished | None:
        now = time.monotonic()
        with self._lock:
            r = self._running.pop(request, None)
            if r is None:
                return None
            r.tokens = max(r.tokens, tokens)
            finished = Finished(
                request,
                r.endpoint,
                time.time(),
                status,
                prompt_tokens or r.prompt_tokens,
                r.tokens,
                now - r.started,
                r.tokens_per_second(now),
                (r.first_token - r.started) if r.first_token else 0.0,
                stopped_by,
            )
            self._recent.append(finished)
            self._totals.requests[(r.endpoint, status)] += 1
            self._totals.prompt_tokens += finished.prompt_tokens
            self._totals.completion_tokens += finished.tokens
            if stopped_by == "disconnected":
                self._totals.disconnects += 1
            return finished

    def refused_busy(self) -> None:
        with self._lock:
            self._totals.refused_busy += 1

    def refused(self, endpoint: str, status: int) -> None:
        with self._lock:
            self._totals.requests[(endpoint, status)] += 1

    def note(self, text: str) -> None:
        with self._lock:
            self.notes.append(text)

    # -- readers ---------------------------------------------------------------------------------

    def running(self) -> list[Running]:
        """The requests on the engine and in the queue, oldest first (copies)."""
        with self._lock:
            return [replace(r) for r in self._running.values()]

    def recent(self) -> list[Finished]:
        with self._lock:
            return list(self._recent)

    def totals(self) -> Totals:
        with self._lock:
            t = self._totals
            return Totals(Counter(t.requests), t.prompt_tokens, t.completion_tokens, t.disconnects, t.refused_busy)

    def tokens_per_second(self) -> float:
        """All replies together, now."""
        now = time.monotonic()
        with self._lock:
            return sum(r.tokens_per_second(now) for r in self._running.values() if not r.waiting)
