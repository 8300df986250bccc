"""The app serves too: the loaded model behind the same OpenAI-compatible API as `vramchat serve`, on the
same engine (app/serve/), started and stopped with /serve or the palette. A request and a chat reply take
turns on the engine; the chat screen keeps owning the model's recovery (the server answers 503 while the
model is loaded again). Always on 127.0.0.1 (this machine's tools), with VRAMCHAT_API_KEY when it is set."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.serve.monitor import Monitor
    from app.serve.server import Server
    from app.session import ModelSession
    from app.settings import Settings


class AppServer:
    def __init__(self) -> None:
        self._server: Server | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str:
        return self._server.url if self._server is not None else ""

    @property
    def model_id(self) -> str:
        return self._server.model_id if self._server is not None else ""

    @property
    def monitor(self) -> Monitor | None:
        return self._server.monitor if self._server is not None else None

    def start(self, session: ModelSession, settings: Settings) -> str:
        """Serve the session's model (worker thread); its URL. VramchatError says why it cannot be."""
        from app.conversation.sampling import user_defaults
        from app.errors import VramchatError
        from app.serve.options import ServeOptions, api_key_from
        from app.serve.runner import Defaults
        from app.serve.server import Server

        with self._lock:
            if self._server is not None:
                return self._server.url
            if session.model is None:
                raise VramchatError("load a model first: the server serves the model the chat holds")
            options = ServeOptions(api_key=api_key_from(None))
            defaults = Defaults(user=user_defaults(settings.temperature, settings.max_tokens))
            server = Server(session, options, defaults, recovers=False)
            server.start()
            self._server = server
            return server.url

    def stop(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.stop()
