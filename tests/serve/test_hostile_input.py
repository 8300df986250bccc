"""What no polite client sends, in raw HTTP: each is answered in words (an OpenAI error body) or its
connection is let go, and the server answers the next request. Against the real demo in the real engine
process: invalid JSON, a 20 MB body, a client that sends a byte a second, 50 connections at once, a stream
dropped mid-reply, and a request after the engine process was stopped (SIGSTOP)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.serve.options import Limits
from tests.support.serve import Served, load_session, post, raw_request, read_answer, serving

pytestmark = pytest.mark.llama
QUESTION = {
    "model": "demo",
    "messages": [{"role": "user", "content": "What is the capital of France?"}],
    "max_tokens": 4,
}


@pytest.fixture(scope="module")
def session(gemma_path: Path) -> Iterator:
    session = load_session(gemma_path)
    yield session
    session.close()


@pytest.fixture
def served(session) -> Iterator[Served]:
    with serving(session, limits=Limits(queue=8, body_seconds=2.0, head_seconds=2.0)) as s:
        yield s


def _error(body: bytes) -> dict:
    error = json.loads(body)["error"]
    assert set(error) >= {"message", "type", "code"}
    return error


def _still_answers(served: Served) -> None:
    status, _headers, body = raw_request(served.port, post("/v1/chat/completions", QUESTION))
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"].startswith("Paris")


def test_invalid_json_and_wrong_fields_are_answered_in_words(served: Served) -> None:
    status, _, body = raw_request(served.port, post("/v1/chat/completions", b'{"model": "demo", "messages": [}'))
    assert status == 400 and _error(body)["code"] == "invalid_json"
    assert "not valid JSON" in _error(body)["message"] and "column" in _error(body)["message"]
    for wrong, param in (
        ({"model": "demo", "messages": "hello"}, "messages"),
        ({"model": "demo", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({**QUESTION, "max_tokens": "many"}, "max_tokens"),
        ({**QUESTION, "temperature": float("nan")}, None),  # json.dumps writes NaN; the server refuses it
        ({**QUESTION, "stop": ["x"] * 100}, "stop"),
        ({**QUESTION, "n": 3}, "n"),
        ({**QUESTION, "seed": 3.5}, "seed"),
        ({**QUESTION, "top_k": 40.5}, "top_k"),
        ({"model": "demo", "messages": [QUESTION["messages"][0]] * 2000}, "messages"),
    ):
        status, _, body = raw_request(served.port, post("/v1/chat/completions", wrong))
        assert status == 400, (wrong, body)
        if param:
            assert _error(body)["param"] == param, body
    status, _, body = raw_request(served.port, post("/v1/nothing", QUESTION))
    assert status == 404 and "no such endpoint" in _error(body)["message"]
    status, _, body = raw_request(
        served.port, b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert status == 405 and _error(body)["message"]
    _still_answers(served)


def test_a_20_mb_body_is_refused_before_it_is_read(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {20 * 1024 * 1024}\r\n\r\n".encode() + b'{"messages": [' + b" " * 65536)
        status, _, body = read_answer(sock)
    assert status == 413 and "larger than this server takes (8 MiB)" in _error(body)["message"]
    # without a length, counted as it comes: cut off at the limit
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b" " * (1024 * 1024)
        try:
            for _ in range(20):
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        except OSError:  # the server answered and closed: the rest is not read
            pass
        status, _, body = read_answer(sock)
    assert status == 413
    _still_answers(served)


def _closed_unanswered(sock: socket.socket) -> bool:
    """Closed by the server without a byte of answer: an orderly end, or a reset where a byte the client
    dripped in after the server's last read was still unread as it closed (the kernel then resets)."""
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


def test_a_client_that_sends_a_byte_a_second_is_let_go_and_the_others_are_served(served: Served) -> None:
    slow_body = socket.create_connection(("127.0.0.1", served.port), timeout=30)
    slow_head = socket.create_connection(("127.0.0.1", served.port), timeout=30)
    data = json.dumps(QUESTION).encode()
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n".encode()
    slow_body.sendall(head)
    started = time.monotonic()
    answers: list[tuple[int, dict, bytes]] = []

    def drip() -> None:
        try:
            for i in range(10):
                slow_body.sendall(data[i : i + 1])
                slow_head.sendall(head[i : i + 1])
                time.sleep(1.0)
        except OSError:
            pass

    dripping = threading.Thread(target=drip)
    dripping.start()
    _still_answers(served)  # while both drip
    answers.append(read_answer(slow_body))
    assert answers[0][0] == 408 and "took longer than 2 s" in _error(answers[0][2])["message"]
    assert _closed_unanswered(slow_head)  # the head's deadline: the connection closed, no answer owed
    assert time.monotonic() - started < 8
    dripping.join()
    slow_body.close()
    slow_head.close()
    _still_answers(served)


def test_fifty_connections_at_once_are_queued_in_order_or_told_to_come_back(served: Served) -> None:
    hold = socket.create_connection(("127.0.0.1", served.port), timeout=60)  # the one slot, busy
    hold.sendall(
        post("/v1/completions", {"model": "demo", "prompt": "Once upon a time", "max_tokens": 900, "stream": True})
    )
    seen = b""
    while b"data: " not in seen:
        seen += hold.recv(4096)
    results: list[tuple[int, dict, bytes]] = []
    lock = threading.Lock()

    def one() -> None:
        answer = raw_request(served.port, post("/v1/chat/completions", {**QUESTION, "max_tokens": 1}), timeout=120)
        with lock:
            results.append(answer)

    threads = [threading.Thread(target=one) for _ in range(50)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(results) < 42 and time.monotonic() < deadline:  # the queue holds 8: the other 42 are told at once
        time.sleep(0.05)
    assert len(results) == 42 and {status for status, _, _ in results} == {503}
    for _status, headers, body in results:
        assert _error(body)["code"] == "queue_full" and headers["retry-after"] == "1"
        assert "the server is busy: 1 request running and 8 waiting" in _error(body)["message"]
    hold.close()  # the slot frees: the eight waiting are answered in turn
    for t in threads:
        t.join()
    assert sorted(status for status, _, _ in results) == [200] * 8 + [503] * 42
    assert served.server.state.lanes.busy == 0 and served.server.state.lanes.waiting == 0
    _still_answers(served)


def test_a_dropped_stream_stops_its_reply_and_frees_its_slot(served: Served) -> None:
    long = {"model": "demo", "prompt": "Once upon a time", "max_tokens": 400, "stream": True, "temperature": 0}
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        sock.sendall(post("/v1/completions", long))
        seen = b""
        while b"data: " not in seen:
            seen += sock.recv(4096)
        assert b" 200 " in seen.split(b"\r\n", 1)[0]
    deadline = time.monotonic() + 30
    while served.server.state.lanes.busy and time.monotonic() < deadline:
        time.sleep(0.05)
    assert served.server.state.lanes.busy == 0  # the slot is free
    stats = served.session.engine.last_stats
    assert stats.stopped_by == "user" and stats.generated_tokens < 400  # the engine stopped at once
    assert any("disconnected" in line for line in served.lines)
    _still_answers(served)


def test_a_stopped_engine_is_ended_and_the_model_loaded_again(
    gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_STALL_SECONDS", "5")  # app/engine/stall.py: a fixed limit for tests
    session = load_session(gemma_path)
    try:
        with serving(session) as served:
            _still_answers(served)
            pid = session.engine.pid
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            try:
                status, headers, body = raw_request(served.port, post("/v1/chat/completions", QUESTION), timeout=60)
            finally:
                with contextlib.suppress(ProcessLookupError):  # killed by then, unless the test failed
                    os.kill(pid, signal.SIGCONT)
            assert status == 503 and headers["retry-after"] == "5", body
            assert "without a token or any progress" in _error(body)["message"]
            _still_answers(served)  # loaded again
            assert session.engine.pid != pid
            assert any("loaded again" in line for line in served.lines)
    finally:
        session.close()
