"""A real server for tests: a model loaded in the real engine process, `app.serve.Server` on 127.0.0.1 on a
free port in a thread, and raw HTTP helpers for what no polite client sends."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from app.serve.options import Limits, ServeOptions
from app.serve.server import Server
from app.session import ModelSession


@dataclass
class Served:
    server: Server
    session: ModelSession
    lines: list[str] = field(default_factory=list)  # the request log, as `vramchat serve` prints it

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port

    def client(self, **kwargs: object):  # -> openai.OpenAI
        from openai import OpenAI

        return OpenAI(base_url=self.url, api_key=kwargs.pop("api_key", "none"), max_retries=0, **kwargs)  # type: ignore[arg-type]


def load_session(path: Path, n_ctx: int = 2048, parallel: int = 1, elastic: bool = False) -> ModelSession:
    from app.devices import probe_devices
    from planner.anatomy import load_anatomy
    from planner.config import LoadConfig
    from planner.fit import evaluate
    from planner.gguf import read_gguf

    devices = probe_devices(cpu_only=True)
    anatomy = load_anatomy(read_gguf(path))
    config = LoadConfig(n_ctx=n_ctx, n_seq_max=parallel, flash_attn=True)
    fit = evaluate(anatomy, config, [], devices.host)
    session = ModelSession(elastic=elastic)
    session.load(str(path), anatomy, fit, devices, reprobe=lambda: devices)
    return session


@contextlib.contextmanager
def serving(
    session: ModelSession,
    parallel: int = 1,
    api_key: str | None = None,
    limits: Limits | None = None,
    name: str = "demo",
) -> Iterator[Served]:
    """A server on `session` until the block ends (the session stays loaded); `name`: what the command
    line called the model (requests may call it so)."""
    lines: list[str] = []
    options = ServeOptions("127.0.0.1", 0, api_key, parallel, limits or Limits())
    server = Server(session, options, on_line=lines.append, asked_name=name)
    served = Served(server, session, lines)
    server.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not start")
        time.sleep(0.02)
    try:
        yield served
    finally:
        server.stop()


@contextlib.contextmanager
def served_file(path: Path, n_ctx: int = 2048, name: str = "demo") -> Iterator[Served]:
    """The model at `path` loaded and served until the block ends, then closed."""
    session = load_session(path, n_ctx=n_ctx)
    try:
        with serving(session, name=name) as s:
            yield s
    finally:
        session.close()


def raw_request(port: int, data: bytes, timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    """Send `data` as it is; (status, headers, body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return read_answer(sock)


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(65536)
        if not chunk:
            break
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0] else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "-1"))
    while length >= 0 and len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body


def post(path: str, body: bytes | dict, extra: str = "") -> bytes:
    """An HTTP/1.1 POST as bytes (a dict is sent as JSON)."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n{extra}Connection: close\r\n\r\n"
    )
    return head.encode() + data


def get(port: int, path: str, key: str | None = None) -> tuple[int, str]:
    """(status, text) of a GET (urllib: the standard library's own client)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
