"""A server on a loaded session: the routes (app/serve/api.py) under uvicorn, on a socket bound here (so
the port is known, and said, before the first request), in the foreground for `vramchat serve` or in a
thread for the app.

Why Starlette and uvicorn: the API is five routes whose bodies are checked by hand into OpenAI's own
error shapes, so FastAPI's pydantic models (and its 422 answers, which no OpenAI client expects) would be
in the way; Starlette is the ASGI toolkit FastAPI is built on (requests, streamed responses, disconnects),
uvicorn its server (HTTP/1.1 by h11, keep-alive, a connection limit, graceful shutdown). llama-cpp-python's
own server (`llama_cpp.server`) runs llama.cpp inside the server's process through its `Llama` class, one
request at a time behind a lock: vramchat keeps llama.cpp in its engine process (crash isolation, the
template sandbox, stall detection, the growing context, recovery) and plans N parallel slots, so none of
that server fits; its wire format is OpenAI's, which this one speaks too.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.demo import DEMO_NAMES
from app.demo import MODEL_NAME as DEMO_MODEL_NAME
from app.serve.api import ServeState, build_app
from app.serve.http_protocol import with_head_deadline
from app.serve.monitor import Monitor
from app.serve.options import ServeOptions, base_url, listening_socket
from app.serve.runner import Defaults, Runner

if TYPE_CHECKING:
    from app.devices import DeviceReport
    from app.session import ModelSession


def model_names(session: ModelSession, asked: str = "") -> tuple[str, frozenset[str]]:
    """The model's id (its file's name without .gguf) and the names a request may call it by."""
    model = session.model
    assert model is not None
    path = Path(model.path)
    model_id = path.name.removesuffix(".gguf")
    names = {model_id.lower(), path.name.lower(), model.path.lower()}
    if model.anatomy.name:
        names.add(model.anatomy.name.lower())
    if path.name == DEMO_MODEL_NAME:  # the demo answers to `demo`, as the command line calls it
        names.update(DEMO_NAMES)
    if asked:
        names.add(asked.lower())
    return model_id, frozenset(names)


class Server:
    def __init__(
        self,
        session: ModelSession,
        options: ServeOptions,
        defaults: Defaults | None = None,
        on_line: Callable[[str], None] | None = None,
        reprobe: Callable[[], DeviceReport] | None = None,
        asked_name: str = "",
        recovers: bool = True,
    ) -> None:
        import uvicorn

        self.session = session
        self.options = options
        self.monitor = Monitor(options.parallel)
        say = on_line or (lambda _line: None)

        def note(text: str) -> None:
            self.monitor.note(text)
            say(f"vramchat: {text}")

        self.runner = Runner(session, defaults or Defaults(), options.parallel, reprobe, note, recovers)
        model_id, aliases = model_names(session, asked_name)
        self.state = ServeState(self.runner, self.monitor, options, model_id, aliases, say)
        self.sock, self.port_note = listening_socket(options.host, options.port)
        self.port = int(self.sock.getsockname()[1])
        self.url = base_url(options.host, self.port)
        self.monitor.address = self.url
        limits = options.limits
        config = uvicorn.Config(
            build_app(self.state),
            log_level="critical",
            access_log=False,
            lifespan="off",
            http=with_head_deadline(limits.head_seconds),
            limit_concurrency=limits.connections,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=3,
            server_header=False,
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def model_id(self) -> str:
        return self.state.model_id

    def serve(self) -> None:
        """In the foreground until Ctrl+C or SIGTERM (uvicorn's own handlers stop it gracefully)."""
        try:
            asyncio.run(self._uvicorn.serve(sockets=[self.sock]))
        finally:
            self.close()

    def start(self) -> None:
        """In a thread of its own (the app); `stop` ends it."""
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._uvicorn.serve(sockets=[self.sock])), name="vramchat-serve", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._uvicorn.should_exit = True  # open replies are cancelled after the graceful wait: their engine work stops
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.close()

    def close(self) -> None:
        self.runner.close()
        with contextlib.suppress(OSError):
            self.sock.close()

    @property
    def started(self) -> bool:
        return bool(self._uvicorn.started)
