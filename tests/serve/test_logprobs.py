"""Log-probabilities (`logprobs`, `top_logprobs`) through the `openai` client, from the demo served for real:
each token of the reply with its log-probability under the model and the likeliest tokens beside it, plain
and streamed, in the chat's and the completions API's shapes; the tokens a stop string cut off are not
among them; out-of-range asks are refused in words."""

from __future__ import annotations

import math

import openai
import pytest

from tests.support.serve import Served

pytestmark = pytest.mark.llama
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def served(served_demo: Served) -> Served:
    return served_demo


def test_each_token_of_a_chat_reply_comes_with_its_logprob_and_the_likeliest_beside_it(served: Served) -> None:
    client = served.client()
    reply = client.chat.completions.create(
        model="demo",
        messages=QUESTION,
        max_tokens=12,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
        extra_body={"repeat_penalty": 1.0},  # greedy over the model's own distribution: the likeliest is drawn
    )
    choice = reply.choices[0]
    entries = choice.logprobs.content
    assert choice.message.content == "Paris."
    # the reply's own tokens, and none of the stop string ("\nQ:") that ended it
    assert "".join(e.token for e in entries).strip() == "Paris." and len(entries) < reply.usage.completion_tokens
    for e in entries:
        assert e.bytes == list(e.token.encode()) and e.logprob <= 0
        assert len(e.top_logprobs) == 3 and [t.logprob for t in e.top_logprobs] == sorted(
            (t.logprob for t in e.top_logprobs), reverse=True
        )
        assert sum(math.exp(t.logprob) for t in e.top_logprobs) <= 1 + 1e-6
        assert (e.token, e.logprob) == (e.top_logprobs[0].token, e.top_logprobs[0].logprob)  # greedy: the likeliest
    assert math.exp(entries[0].logprob) > 0.5  # the model is sure of Paris
    chunks = client.chat.completions.create(
        model="demo", messages=QUESTION, max_tokens=12, temperature=0, logprobs=True, top_logprobs=3, stream=True
    )
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [e.token for e in streamed] == [e.token for e in entries]
    # the same figures (the prompt read from the cache this time: the last digits may differ)
    assert all(abs(a.logprob - b.logprob) < 0.05 for a, b in zip(streamed, entries, strict=True))
    plain = client.chat.completions.create(model="demo", messages=QUESTION, max_tokens=4)
    assert plain.choices[0].logprobs is None


def test_a_completions_logprobs_in_its_own_shape(served: Served) -> None:
    reply = served.client().completions.create(
        model="demo",
        prompt="The capital of France is",
        max_tokens=4,
        temperature=0,
        logprobs=2,
        extra_body={"repeat_penalty": 1.0},
    )
    choice = reply.choices[0]
    lp = choice.logprobs
    assert "".join(lp.tokens) == choice.text and len(lp.tokens) == 4
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(4)]
    assert all(
        len(top) <= 2 and max(top.values()) == top_lp
        for top, top_lp in zip(lp.top_logprobs, lp.token_logprobs, strict=True)
    )


@pytest.mark.parametrize(
    ("endpoint", "extra", "param"),
    [
        ("chat", {"top_logprobs": 3}, "top_logprobs"),
        ("chat", {"logprobs": True, "top_logprobs": 50}, "top_logprobs"),
        ("chat", {"logprobs": "yes"}, "logprobs"),
        ("completions", {"logprobs": 100}, "logprobs"),
    ],
)
def test_logprobs_asked_out_of_range_are_refused(served: Served, endpoint: str, extra: dict, param: str) -> None:
    client = served.client()
    with pytest.raises(openai.BadRequestError) as caught:
        if endpoint == "chat":
            client.chat.completions.create(model="demo", messages=QUESTION, max_tokens=2, extra_body=extra)
        else:
            client.completions.create(model="demo", prompt="x", max_tokens=2, extra_body=extra)
    assert caught.value.body["param"] == param  # type: ignore[index]


@pytest.mark.parametrize("n_vocab", [50, 262_144])
def test_the_likeliest_tokens_are_found_as_a_full_sort_finds_them(n_vocab: int) -> None:
    import numpy as np

    from app.engine.logprobs import _likeliest

    logits = np.random.default_rng(n_vocab).normal(0, 3, n_vocab).astype(np.float32)
    logits[[5, 9, 30]] = logits.max() + 1  # a three-way tie at the top: the lower id first, as a stable sort
    for k in (1, 3, 20):
        assert list(_likeliest(logits, k)) == list(np.argsort(-logits, kind="stable")[:k])
