"""The engine process: llama.cpp lives here, one process per loaded model.

Started by `app.engine.process.EngineProcess` as `python -m app.engine.child FD`,
where FD is this end of a socket pair. Requests come in as pickled tuples and
answers go back the same way (see `app.engine.protocol`). A reader thread takes
every request off the socket at once, so that a stop reaches the engine while
the main thread is inside llama_decode; when the socket closes (the app exited
or was killed) the process ends, so no model outlives the app that loaded it.

Every llama.cpp log line is also written to stderr, unbuffered: when llama.cpp
takes the process down, the app reads its last words there.
"""

from __future__ import annotations

import faulthandler
import os
import queue
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from app.children import die_with_parent
from app.engine import protocol as p
from app.engine.data_limit import capped
from app.engine.media_cache import MediaCache
from app.engine.types import MediaPrompt

PIECE_INTERVAL = 0.05  # seconds: at most 20 messages a second while a reply streams


class _Server:
    def __init__(self, conn: Connection) -> None:
        from app.engine.engine import Engine

        self.conn = conn
        self.engine = Engine()
        self.engine.on_prefilled = self._prefilled
        self.engine.on_prefill_step = self._prefill_step
        self.engine.on_media_encoding = lambda index, count: self.send(p.ENCODING, index, count)
        self.engine.on_media_encoded = self._media_encoded
        self.media_cache = MediaCache()
        self.inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._send_lock = threading.Lock()
        self.slots: Any = None  # app.engine.slots.Slots while parallel replies run

    def send(self, *message: Any) -> None:
        with self._send_lock:
            self.conn.send(message)

    def read_requests(self) -> None:
        """Reader thread: stops act at once, the rest queue for the main thread."""
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                os._exit(0)  # the app is gone: so is this model
            if message[0] == p.STOP:
                self.engine.stop()
            elif message[0] == p.SLOT_CANCEL:
                slots = self.slots
                if slots is not None:
                    slots.cancel(message[1])
            else:
                self.inbox.put(message)

    def _prefill_step(self, done: int, total: int) -> None:
        self.send(p.PREFILLING, done, total, self.engine.kv_cells_used())

    def _media_encoded(self, event: Any) -> None:
        report = self.engine.report
        m = report.measurements if report is not None else None
        self.send(p.ENCODED, event, m.projector_weights if m else {}, m.projector_compute if m else {})

    def _prefilled(self, stats: Any) -> None:
        self.send(p.PREFILLED, stats.reused_tokens, stats.prompt_seconds, self.engine.kv_cells_used())

    def serve(self) -> None:
        while True:
            op, *args = self.inbox.get()
            if op == p.EXIT:
                self.engine.close()
                self.send(p.RESULT, None)
                return
            try:
                self.handle(op, args)
            except Exception as exc:
                from app.engine.types import EngineError

                if isinstance(exc, EngineError):
                    self.send(p.ERROR, str(exc), exc.log, exc.status)
                else:  # a bug on this side: the app still gets words, and the traceback in the log
                    lines = traceback.format_exc().splitlines()
                    for line in lines:
                        os.write(2, (line + "\n").encode())
                    self.send(p.ERROR, f"the engine failed: {type(exc).__name__}: {exc}", lines[-3:], None)

    def generate(self, prompt: Any, params: Any) -> None:
        """Stream the reply; pieces that come faster than PIECE_INTERVAL go out together, so that the
        app's process wakes 20 times a second at most while llama.cpp's threads have the cores."""
        engine = self.engine
        pending, last, sent = "", 0.0, 0  # sent: the tokens' log-probabilities sent so far

        def send_piece() -> None:
            nonlocal sent
            stats = engine.last_stats
            entries = stats.logprobs[sent:]
            sent = len(stats.logprobs)
            self.send(p.PIECE, pending, stats.generated_tokens, entries, engine.kv_cells_used())

        for piece in engine.generate(prompt, params):
            pending += piece
            now = time.monotonic()
            if now - last >= PIECE_INTERVAL:
                send_piece()
                pending, last = "", now
        if pending:
            send_piece()
        self.send(p.DONE, engine.last_stats, engine.kv_cells_used())

    def serve_slots(self) -> None:
        """Parallel replies (app/engine/slots.py) until SLOTS_CLOSE: between steps, the requests that came
        are taken (a new reply joins the next step); with nothing running, the next request is waited for."""
        from app.engine.types import EngineError

        slots = self.slots = self.engine.slots()
        self.send(p.RESULT, slots.c.n_ctx_seq)
        try:
            while True:
                try:
                    message = self.inbox.get(block=not slots.busy)
                except queue.Empty:
                    message = None
                while message is not None:
                    op, *args = message
                    if op in (p.SLOTS_CLOSE, p.EXIT):
                        for out in slots.cancel_all():
                            self.send(*out)
                        if op == p.EXIT:
                            self.inbox.put(message)  # serve() ends the process
                        else:
                            self.send(p.RESULT, None)
                        return
                    if op == p.SLOT_START:
                        for out in slots.start(*args):
                            self.send(*out)
                    elif op == p.SLOT_TOKENIZE:
                        request, *how = args
                        try:
                            self.send(p.SLOT_RESULT, request, self.engine.tokenize(*how))
                        except EngineError as exc:
                            self.send(p.SLOT_ERROR, request, str(exc), exc.log, exc.status)
                    else:
                        self.send(p.ERROR, f"{op!r} cannot run while parallel replies are served", [], None)
                    try:
                        message = self.inbox.get_nowait()
                    except queue.Empty:
                        message = None
                for out in slots.step():
                    self.send(*out)
        finally:
            self.slots = None

    def handle(self, op: str, args: list[Any]) -> None:
        engine = self.engine
        if op in (p.LOAD, p.DRY_RUN):
            _connect_rpc_servers()
        if op == p.LOAD:
            path, config, projector = args

            def progress(fraction: float) -> bool:
                self.send(p.PROGRESS, fraction)
                return True

            with capped():  # tests only: a device buffer past the cap runs out of memory for real
                report = engine.load(path, config, progress, projector)
            self.send(p.LOADED, report)
        elif op in (p.GENERATE, p.TOKENIZE_MEDIA) and isinstance(args[0], MediaPrompt):
            whole = self.media_cache.whole(args[0])  # the pictures sent by key alone, their bytes from those kept
            if isinstance(whole, list):
                self.send(p.MISSING_MEDIA, whole)
            elif op == p.GENERATE:
                self.generate(whole, *args[1:])
            else:
                self.send(p.RESULT, engine.tokenize_media(whole))
        elif op == p.GENERATE:
            self.generate(*args)
        elif op == p.TOKENIZE:
            self.send(p.RESULT, engine.tokenize(*args))
        elif op == p.SPECIAL_TEXT:
            self.send(p.RESULT, engine.special_text(*args))
        elif op == p.DRY_RUN:
            from app.engine.dry_run import dry_run

            self.send(p.RESULT, dry_run(*args))
        elif op == p.SLOTS_OPEN:
            self.serve_slots()
        elif op == p.RESIZE:
            from app.engine.types import EngineError

            try:
                with capped():
                    resized, failure = engine.resize(*args), None
            except EngineError as exc:  # the old size is back (or nothing is): the app needs the report
                resized, failure = None, (str(exc), exc.log)
            self.send(p.RESULT, (resized, engine.report, engine.kv_cells_used(), failure))
        else:
            raise ValueError(f"unknown request {op!r}")


def _connect_rpc_servers() -> None:
    """The RPC servers the app was told to use (--rpc), given to llama.cpp before it lists devices."""
    from app.engine.types import EngineError
    from app.rpc.client import connect_configured
    from app.rpc.wire import RpcError

    try:
        connect_configured()
    except (RpcError, ValueError) as exc:
        raise EngineError(str(exc)) from None


def main(argv: list[str]) -> int:
    fd = int(argv[1])
    die_with_parent()
    faulthandler.enable(file=sys.stderr, all_threads=False)  # a native crash leaves the Python stack
    conn = Connection(fd)
    from app.engine.llama_log import capture

    capture().echo_fd = 2
    server = _Server(conn)
    threading.Thread(target=server.read_requests, name="vramchat-engine-reader", daemon=True).start()
    server.send(p.READY, os.getpid())
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
