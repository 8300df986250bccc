"""The queue and the slots: requests are served in the order they came, `slots` at a time; at most `limit`
wait, and one more is refused at once (503, in words, with Retry-After) rather than left hanging. A
request that gives up while it waits (its client went away) leaves the queue. Lives on the event loop."""

from __future__ import annotations

import asyncio
from collections import deque

from app.serve.errors import unavailable


class Lanes:
    def __init__(self, slots: int, limit: int) -> None:
        self.slots = slots
        self.limit = limit
        self._free = list(range(slots))
        self._waiting: deque[asyncio.Future[int]] = deque()

    @property
    def waiting(self) -> int:
        return sum(1 for f in self._waiting if not f.done())

    @property
    def busy(self) -> int:
        return self.slots - len(self._free)

    async def enter(self) -> int:
        """A slot (its number), when this request's turn comes; ApiError 503 when the queue is full."""
        if self._free and not self.waiting:
            return self._free.pop(0)
        if self.waiting >= self.limit:
            raise unavailable(
                f"the server is busy: {self.busy} request{'s' if self.busy != 1 else ''} running and {self.waiting} "
                f"waiting, the most it queues; try again shortly",
                "queue_full",
            )
        turn: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.leave(turn.result())  # the slot came as the client left: pass it on
            raise
        finally:
            if turn in self._waiting:
                self._waiting.remove(turn)

    def leave(self, slot: int) -> None:
        """The slot is free again: the oldest waiting request gets it."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(slot)
                return
        self._free.append(slot)
        self._free.sort()
