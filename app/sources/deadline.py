"""Time limits no server can stretch: every HTTP request vramchat makes ends in bounded time.

httpx2's timeouts apply to each socket read, so a server that sends one byte (or one header line) every
few seconds never trips them and holds a request for ever. Here the limit is kept per request and
checked at every socket read, whatever the connection (new, kept alive, TLS):

- from the request's start to its last header: `REQUEST_DEADLINE` seconds;
- a small body (Content-Length up to `SMALL_BODY`) shares that deadline;
- a large or unsized body (a model file) may take as long as it needs while it keeps coming: at least
  `STALL_BYTES` in every `STALL_WINDOW` seconds, else it has stalled.

Both end the request with httpx2.ReadTimeout carrying a message in words (`is_over_limit` tells it apart
from an ordinary timeout, which is worth retrying; this is not). The limits are module constants, read
at each request: tests lower them.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from typing import Any

import httpcore2
import httpx2

REQUEST_DEADLINE = 30.0  # seconds from a request's start to its headers (and the end of a small body)
SMALL_BODY = 1024 * 1024  # bytes: a body up to this size (an API answer) arrives within the deadline
STALL_WINDOW = 30.0  # seconds: a large body that brings less than STALL_BYTES in this long has stalled
STALL_BYTES = 16 * 1024
_MARK = "(vramchat's limit)"


class _Budget:
    """What a request may still spend: a deadline, moved on by each STALL_BYTES once the body is large."""

    def __init__(self, seconds: float, why: str) -> None:
        self.deadline = time.monotonic() + seconds
        self.why = why
        self.streaming = False
        self.arrived = 0

    def stream_from_now(self) -> None:
        self.streaming = True
        self.arrived = 0
        self.deadline = time.monotonic() + STALL_WINDOW
        self.why = f"the server stalled: under {STALL_BYTES // 1024} KiB arrived in {STALL_WINDOW:g} s"

    def timeout(self, asked: float | None) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise httpcore2.ReadTimeout(f"{self.why} {_MARK}")
        return left if asked is None else min(asked, left)

    def got(self, n: int) -> None:
        if self.streaming:
            self.arrived += n
            if self.arrived >= STALL_BYTES:
                self.arrived = 0
                self.deadline = time.monotonic() + STALL_WINDOW


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("vramchat_http_budget", default=None)


def is_over_limit(exc: BaseException) -> bool:
    """A timeout raised by these limits (a slow or stalled server), not an ordinary one."""
    return isinstance(exc, (httpx2.TimeoutException, httpcore2.TimeoutException)) and _MARK in str(exc)


def reason(exc: BaseException) -> str:
    """The limit's message without its mark."""
    return str(exc).replace(_MARK, "").strip()


class _Stream(httpcore2.NetworkStream):
    """A connection whose every read and write is bounded by the budget of the request using it."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        budget = _budget.get()
        if budget is None:
            return self._inner.read(max_bytes, timeout)
        try:
            data = self._inner.read(max_bytes, budget.timeout(timeout))
        except httpcore2.ReadTimeout:
            if budget.deadline - time.monotonic() < 0.05:  # the budget ran out, not the read's own timeout
                raise httpcore2.ReadTimeout(f"{budget.why} {_MARK}") from None
            raise
        budget.got(len(data))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        budget = _budget.get()
        self._inner.write(buffer, budget.timeout(timeout) if budget is not None else timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore2.NetworkStream:
        return _Stream(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore2.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _BudgetedBody(httpx2.SyncByteStream):
    """A response body read under its request's budget, whoever reads it and from whatever thread."""

    def __init__(self, inner: Any, budget: _Budget) -> None:
        self._inner, self._budget = inner, budget

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._inner)
        while True:
            token = _budget.set(self._budget)
            try:
                chunk = next(chunks, None)
            finally:
                _budget.reset(token)
            if chunk is None:
                return
            yield chunk

    def close(self) -> None:
        self._inner.close()


class BoundedTransport(httpx2.HTTPTransport):
    """httpx2's transport, each request of which runs under a budget (see the module's docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        pool = getattr(self, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is not None:  # httpx2 builds its pool without a way to pass a backend in
            pool._network_backend = _Backend(backend)  # type: ignore[union-attr]

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        why = f"the server answers too slowly: nothing whole within {REQUEST_DEADLINE:g} s"
        budget = _Budget(REQUEST_DEADLINE, why)
        token = _budget.set(budget)
        try:
            response = super().handle_request(request)
        finally:
            _budget.reset(token)
        size = response.headers.get("Content-Length", "")
        if not (size.isdigit() and int(size) <= SMALL_BODY):
            budget.stream_from_now()
        response.stream = _BudgetedBody(response.stream, budget)
        return response
