"""What a server is told: where it listens, its key, its slots, and the limits it holds every client to.

The exposure rule: a server on a loopback address (127.0.0.1, ::1, localhost) is for this machine's own
tools and may go without a key; any other address is reachable by others, so it needs one (`--api-key`
or `VRAMCHAT_API_KEY`).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass

from app.errors import UsageError

KEY_ENV = "VRAMCHAT_API_KEY"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
PORTS_TRIED = 20  # without --port: 8080, else the next free one of these


@dataclass(frozen=True)
class Limits:
    """What one request may be and take; each refusal names its limit."""

    body_bytes: int = 8 * 1024 * 1024  # a request's JSON (images as data URLs included)
    messages: int = 1024  # messages in one chat request
    text_chars: int = 4 * 1024 * 1024  # all the text of one request
    stops: int = 16  # stop strings, as OpenAI allows 4 (llama.cpp's server more)
    stop_chars: int = 256  # one stop string
    tools: int = 128  # tools declared in one request
    schema_chars: int = 64 * 1024  # a response_format's JSON schema, written out
    logit_biases: int = 1024  # tokens in one request's logit_bias
    images: int = 16  # images in one request
    queue: int = 64  # requests waiting for a slot; one more is answered 503
    body_seconds: float = 30.0  # to send a request's body
    head_seconds: float = 15.0  # to send a request's line and headers
    connections: int = 256  # open connections; more are answered 503 by the HTTP server


@dataclass(frozen=True)
class ServeOptions:
    host: str = DEFAULT_HOST
    port: int | None = None  # None: DEFAULT_PORT or the first free one after it
    api_key: str | None = None
    parallel: int = 1
    limits: Limits = Limits()


def is_loopback(host: str) -> bool:
    if host.strip().lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def api_key_from(given: str | None) -> str | None:
    """--api-key, else VRAMCHAT_API_KEY, else None."""
    key = given if given is not None else os.environ.get(KEY_ENV)
    if key is not None and not key.strip():
        raise UsageError(f"the API key is empty ({'--api-key' if given is not None else KEY_ENV})")
    if key is not None and any(c.isspace() or not c.isprintable() for c in key):
        raise UsageError("the API key may not hold spaces or control characters (it travels in a header)")
    return key


def check_exposure(host: str, key: str | None) -> None:
    """A server reachable from other machines needs a key: UsageError says how to give one."""
    if not is_loopback(host) and not key:
        raise UsageError(
            f"--host {host} lets other machines reach the model: give it a key with --api-key KEY or "
            f"{KEY_ENV}=KEY (clients then send 'Authorization: Bearer KEY'), or serve on 127.0.0.1"
        )


def listening_socket(host: str, port: int | None) -> tuple[socket.socket, str]:
    """A bound, listening socket (port given: that one; else DEFAULT_PORT or the next free one) and a
    note when the default port was taken. UsageError when no port can be had."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    address = host.strip("[]")
    candidates = [port] if port is not None else list(range(DEFAULT_PORT, DEFAULT_PORT + PORTS_TRIED))
    last: OSError | None = None
    for candidate in candidates:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, candidate))
            sock.listen(2048)
        except OSError as exc:
            sock.close()
            last = exc
            if port is not None or exc.errno not in (98, 48, 10048):  # EADDRINUSE: try the next one
                break
            continue
        note = "" if port is not None or candidate == DEFAULT_PORT else f"port {DEFAULT_PORT} is in use"
        sock.setblocking(False)
        return sock, note
    what = f"port {port}" if port is not None else f"ports {candidates[0]}-{candidates[-1]}"
    raise UsageError(f"cannot listen on {host} {what}: {last.strerror if last else 'unknown error'}")


def base_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/v1"
