"""The app over two RPC servers: the model split across them, the dashboard naming them, and a
server killed mid-reply answered by a message and a reload without it, never a hang."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.rpc.endpoint import Endpoint
from tests.support.pty_app import engine_pid, rows_of, until
from tests.support.rpc import free_port, start_server, wait_until_serving

pytestmark = [
    pytest.mark.llama,
    pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal and signals"),
]


def _assistant(db: Path) -> list[tuple[str, str, str]]:
    return [r for r in rows_of(db) if r[0] == "assistant"]


def test_a_server_killed_mid_reply_is_left_out_and_the_chat_goes_on(
    tmp_path: Path, _private_home: Path, rpc_endpoints: list[Endpoint]
) -> None:
    from app.settings import Settings, save_settings
    from app.store import db_path
    from tests.support.pty_app import PtyApp
    from tests.support.tiny import ENDLESS, write_tiny_model

    doomed = Endpoint("127.0.0.1", free_port())
    server = start_server(doomed.port)
    try:
        wait_until_serving(doomed, server)
        model = write_tiny_model(tmp_path / "endless.gguf", ENDLESS)  # a reply that never ends by itself
        save_settings(Settings(max_tokens=16000, scan_known_caches=False))
        db = db_path()
        app = PtyApp(str(model), "--rpc", f"{rpc_endpoints[0]},{doomed}")
        try:
            until(lambda: app.shown("loaded in"), 120, "the model to load over both servers", app=app)
            assert app.shown("RPC0") and app.shown("RPC1"), "the dashboard shows both remote devices"
            first_engine = engine_pid(app)
            app.type("Tell me everything\r")
            until(
                lambda: [r for r in _assistant(db) if r[2] == "streaming" and r[1]], 60, "the reply to stream", app=app
            )
            lost = app.mark()
            server.kill()
            until(
                lambda: app.shown_since_in_words(lost, "RPC server stopped answering"), 60, "the app to say so", app=app
            )
            until(
                lambda: app.shown_since_in_words(lost, f"Left out: {doomed}"), 60, "the server to be left out", app=app
            )
            until(lambda: app.shown_since_in_words(lost, "loaded"), 120, "the reload without it", app=app)
            assert engine_pid(app) not in (None, first_engine)
            assert app.proc.poll() is None
            answered = len(_assistant(db))
            app.type("And then?\r")
            until(
                lambda: [r for r in _assistant(db)[answered:] if r[2] == "streaming" and r[1]],
                60,
                "the next answer, from the servers left",
                every=1.0,
                action=lambda: app.type("\r"),
                app=app,
            )
            app.type("\x1b")
            app.type("\x11")
            until(lambda: app.proc.poll() is not None, 30, "the app to quit")
        finally:
            if app.proc.poll() is None:
                app.kill()
    finally:
        server.kill()
        server.wait()
