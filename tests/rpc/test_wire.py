"""Asking RPC servers what they lend: every failure is a clear sentence within the timeout, never a hang."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from app.rpc.endpoint import Endpoint, parse_endpoint, parse_endpoints
from app.rpc.wire import CONN_CAPS_SIZE, RpcError, query_server


@pytest.mark.parametrize(
    "text, problem",
    [
        ("10.0.0.5", "HOST:PORT"),
        (":50052", "host is missing"),
        ("host:port", "not a number"),
        ("host:70000", "between 1 and 65535"),
        ("::1:50052", "no IPv6"),
    ],
)
def test_a_malformed_endpoint_says_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_endpoint(text)


def test_endpoints_keep_their_order_and_refuse_repeats() -> None:
    assert [str(e) for e in parse_endpoints("b:2, a:1")] == ["b:2", "a:1"]
    with pytest.raises(ValueError, match="twice"):
        parse_endpoints("a:1,a:1")
    assert parse_endpoint("localhost:1").is_loopback and not parse_endpoint("10.0.0.5:1").is_loopback


@pytest.fixture
def fake_server() -> Iterator[Callable[[Callable[[socket.socket], None]], Endpoint]]:
    """A TCP server on 127.0.0.1 that treats its first client with `handle`."""
    listeners: list[socket.socket] = []

    def start(handle: Callable[[socket.socket], None]) -> Endpoint:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listeners.append(listener)

        def serve() -> None:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                handle(conn)

        threading.Thread(target=serve, daemon=True).start()
        return Endpoint("127.0.0.1", listener.getsockname()[1])

    yield start
    for listener in listeners:
        listener.close()


def test_nobody_listening_is_refused_at_once() -> None:
    """A refused connection is said as it comes: not retried until a minute's timeout runs out."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free, and nobody listens once closed
    started = time.monotonic()
    with pytest.raises(RpcError, match=r"connection refused.*serve-rpc"):
        query_server(Endpoint("127.0.0.1", port), timeout=60)
    assert time.monotonic() - started < 30  # half the timeout: a deadline against waiting it out, not a speed


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) but never serves them
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        started = time.monotonic()
        with pytest.raises(RpcError, match=r"did not answer within 0\.5 s.*one client at a time"):
            query_server(Endpoint("127.0.0.1", silent.getsockname()[1]), timeout=0.5)
        assert time.monotonic() - started < 3


def test_something_else_on_the_port_is_named(fake_server) -> None:
    endpoint = fake_server(lambda conn: conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n"))
    with pytest.raises(RpcError, match=r"not a llama\.cpp RPC server"):
        query_server(endpoint, timeout=2)


def test_another_protocol_version_asks_for_the_same_llama_cpp(fake_server) -> None:
    def old_server(conn: socket.socket) -> None:
        conn.recv(1 + 8 + CONN_CAPS_SIZE)
        answer = bytes([6, 0, 0, 0]) + bytes(CONN_CAPS_SIZE)
        conn.sendall(struct.pack("<Q", len(answer)) + answer)

    endpoint = fake_server(old_server)
    with pytest.raises(RpcError, match=r"protocol 6\.0.*same llama\.cpp version"):
        query_server(endpoint, timeout=2)
