"""uvicorn's HTTP/1.1 (h11) with one thing more: a deadline for a request's head. uvicorn times a body's
absence between requests (keep-alive) but not a client that sends its request line and headers a byte a
second, which would hold a connection for as long as it likes; here a head that is not whole within
`head_seconds` of the connection (or of the last answer) ends the connection. The body's own deadline is
the app's (app/serve/body.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


def with_head_deadline(seconds: float) -> type[H11Protocol]:
    class HeadDeadline(H11Protocol):
        head_seconds = seconds

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            waiting_for = self.cycle  # a new request's head replaces it

            def late() -> None:
                if self.cycle is waiting_for and not self.transport.is_closing():
                    self.transport.close()

            self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(self.head_seconds, late)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            timer = getattr(self, "_head_timer", None)
            if timer is not None:
                timer.cancel()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            timer = getattr(self, "_head_timer", None)
            if timer is not None:
                timer.cancel()
            super().connection_lost(exc)

    return HeadDeadline
