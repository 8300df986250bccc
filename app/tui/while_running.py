"""A worker's message handled only while the app runs.

A message a worker posted just before the user quit (Ctrl+Q while models are planned, the hub answers or
a download goes on) is still queued as the app closes, and finds the widgets it would update already
removed: handled, it would end vramchat on an error. The handlers that only show such news drop it then.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TypeVar, cast

from textual.message import Message
from textual.message_pump import MessagePump

Handler = TypeVar("Handler", bound=Callable[..., None])


def while_running(handler: Handler) -> Handler:
    @wraps(handler)
    def handled(node: MessagePump, message: Message) -> None:
        if node.app.is_running:
            handler(node, message)

    return cast(Handler, handled)
