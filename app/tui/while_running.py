"""A worker's message handled only while the app runs.

A message a worker posted just before the user quit (Ctrl+Q while models are planned, the hub answers, a
download goes on or a reply streams) is still queued as the app closes, and finds the widgets it would
update already removed: handled, it would end vramchat on an error. The handlers that only show such news
drop it then (a handler that also keeps something, a reply's receipt, is not one of them).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import TypeVar, cast

from textual.message import Message
from textual.message_pump import MessagePump

Handler = TypeVar("Handler", bound=Callable[..., None] | Callable[..., Awaitable[None]])


def while_running(handler: Handler) -> Handler:
    if inspect.iscoroutinefunction(handler):

        @wraps(handler)
        async def handled_async(node: MessagePump, message: Message) -> None:
            if node.app.is_running:
                await handler(node, message)

        return cast(Handler, handled_async)

    @wraps(handler)
    def handled(node: MessagePump, message: Message) -> None:
        if node.app.is_running:
            handler(node, message)

    return cast(Handler, handled)
