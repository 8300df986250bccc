"""`--parallel N`: the demo loaded with N sequences (the KV of N sequences, as planned), replies decoded
together in the engine process. Six clients at once all end with the same greedy answer one client gets;
a stream dropped mid-reply frees its slot in the engine at once (the next N requests all run); the
metrics count the slots."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.serve import Served, get, load_session, post, serving

pytestmark = pytest.mark.llama
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def served(gemma_path: Path) -> Iterator[Served]:
    session = load_session(gemma_path, n_ctx=3 * 1024, parallel=3)
    try:
        with serving(session, parallel=3) as s:
            yield s
    finally:
        session.close()


def _ask(served: Served, answers: list[str]) -> None:
    reply = served.client().chat.completions.create(model="demo", messages=QUESTION, max_tokens=8)
    answers.append(reply.choices[0].message.content or "")


def test_six_clients_at_once_all_end_with_the_answer_one_gets(served: Served) -> None:
    alone: list[str] = []
    _ask(served, alone)
    assert alone[0].startswith("Paris")
    answers: list[str] = []
    threads = [threading.Thread(target=_ask, args=(served, answers)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert answers == alone * 6
    metrics = get(served.port, "/metrics")[1]
    assert "vramchat_slots 3" in metrics and 'vramchat_context_cells{state="maximum"} 3072' in metrics
    assert len([line for line in served.lines if " 200 " in f" {line} "]) >= 7


def test_a_dropped_stream_frees_its_slot_in_the_engine(served: Served) -> None:
    channel = served.server.runner._channel
    assert channel is not None and channel.n_ctx_seq == 1024
    long = {"model": "demo", "prompt": "Once upon a time", "max_tokens": 900, "stream": True}
    socks = []
    for _ in range(3):  # every slot busy with a long reply
        sock = socket.create_connection(("127.0.0.1", served.port), timeout=60)
        sock.sendall(post("/v1/completions", long))
        socks.append(sock)
    for sock in socks:
        seen = b""
        while b"data: " not in seen:
            seen += sock.recv(4096)
    socks[0].close()  # one client leaves mid-reply
    started = time.monotonic()
    answers: list[str] = []
    _ask(served, answers)  # gets the freed slot while the two others still write
    assert answers[0].startswith("Paris") and time.monotonic() - started < 60
    assert served.server.state.lanes.busy == 2  # the two long replies go on
    for sock in socks[1:]:
        sock.close()
    deadline = time.monotonic() + 30
    while served.server.state.lanes.busy and time.monotonic() < deadline:
        time.sleep(0.05)
    assert served.server.state.lanes.busy == 0
    assert sum("disconnected" in line for line in served.lines) == 3


def test_json_replies_in_slots_side_by_side_each_keep_their_schema(served: Served) -> None:
    """Each slot's reply has its own grammar (and sampler): three at once, each a different question."""
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"enum": ["France", "Italy", "Spain"]}},
        "required": ["city", "country"],
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "capital", "schema": schema}}
    answers: dict[str, dict] = {}

    def ask(country: str) -> None:
        reply = served.client().chat.completions.create(
            model="demo",
            messages=[{"role": "user", "content": f"What is the capital of {country}?"}],
            response_format=fmt,
            max_tokens=40,
            temperature=0,
        )
        answers[country] = json.loads(reply.choices[0].message.content or "")

    _at_once(ask, ("France", "Italy", "Spain"))
    assert sorted(answers) == ["France", "Italy", "Spain"]
    assert all(set(a) == {"city", "country"} and a["country"] in ("France", "Italy", "Spain") for a in answers.values())
    assert answers["France"]["city"] == "Paris"


def test_logprobs_in_slots_are_each_replys_own_tokens(served: Served) -> None:
    """Streamed from slots side by side: each reply's chunks carry its own tokens' log-probabilities, none of
    the stop string that ended it."""
    results: dict[str, tuple[str, list[str]]] = {}

    def ask(country: str) -> None:
        chunks = served.client().chat.completions.create(
            model="demo",
            messages=[{"role": "user", "content": f"What is the capital of {country}?"}],
            max_tokens=16,
            temperature=0,
            logprobs=True,
            top_logprobs=1,
            stream=True,
        )
        text, tokens = "", []
        for c in chunks:
            if c.choices:
                text += c.choices[0].delta.content or ""
                tokens += [e.token for e in (c.choices[0].logprobs.content if c.choices[0].logprobs else [])]
        results[country] = (text, tokens)

    _at_once(ask, ("France", "Italy", "Spain"))
    assert sorted(results) == ["France", "Italy", "Spain"]
    for text, tokens in results.values():
        assert text and "".join(tokens).strip() == text.strip()
    assert results["France"][0].startswith("Paris")


def _at_once(ask: Callable[[str], None], countries: tuple[str, ...]) -> None:
    """`ask` about each country, all at once, each in its own thread, until all have answered."""
    threads = [threading.Thread(target=ask, args=(c,)) for c in countries]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
