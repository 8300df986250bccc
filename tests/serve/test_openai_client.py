"""`vramchat serve` through OpenAI's own Python client, against the real demo model in the real engine
process: the README's question answered plain and streamed, completions, usage counts, and errors raised
as the client raises them."""

from __future__ import annotations

import openai
import pytest

from tests.support.serve import Served, get, serving

pytestmark = pytest.mark.llama
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def served(served_demo: Served) -> Served:
    return served_demo


def test_the_demo_answers_paris_plain_and_streamed(served: Served) -> None:
    client = served.client()
    reply = client.chat.completions.create(model="demo", messages=QUESTION, max_tokens=8)
    assert reply.choices[0].message.content.startswith("Paris")
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.prompt_tokens > 10 and 1 <= reply.usage.completion_tokens <= 8
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens

    chunks = list(
        client.chat.completions.create(
            model=served.server.model_id,
            messages=QUESTION,
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == reply.choices[0].message.content  # greedy: the same answer, piece by piece
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert not chunks[-1].choices and usage.completion_tokens == reply.usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens > 0  # the same prompt again: read from the cache
    assert any("/v1/chat/completions" in line and "200" in line for line in served.lines)


def test_a_completion_continues_the_text_and_stops_at_max_tokens(served: Served) -> None:
    reply = served.client().completions.create(model="demo", prompt="The capital of France is", max_tokens=4)
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 4 and reply.choices[0].text.strip()


def test_the_models_list_names_the_loaded_model(served: Served) -> None:
    models = served.client().models.list().data
    assert [m.id for m in models] == ["gemma-3-270m-q4_k_m"]


def test_errors_arrive_as_the_client_raises_them(served: Served) -> None:
    client = served.client()
    with pytest.raises(openai.NotFoundError, match="not 'gpt-4o'"):
        client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    with pytest.raises(openai.BadRequestError, match="temperature must be between 0 and 2") as bad:
        client.chat.completions.create(model="demo", messages=QUESTION, temperature=3)
    assert bad.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError, match="max_tokens is 9,000") as long:
        client.chat.completions.create(model="demo", messages=QUESTION, max_tokens=9000)
    assert "holds 2,048 tokens" in str(long.value) and long.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError, match=r"the prompt has [0-9,]+ tokens and the context holds 2,048"):
        client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "Paris " * 3000}])
    with pytest.raises(openai.BadRequestError, match="takes no tools"):
        client.chat.completions.create(
            model="demo",
            messages=QUESTION,
            tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        )
    with pytest.raises(openai.BadRequestError, match="without a vision projector"):
        picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        client.chat.completions.create(model="demo", messages=[{"role": "user", "content": [picture]}])
    # and the server goes on answering
    assert client.chat.completions.create(model="demo", messages=QUESTION, max_tokens=4).choices[0].message.content


def test_health_and_metrics(served: Served) -> None:
    assert get(served.port, "/health") == (200, '{"status":"ok"}')
    status, text = get(served.port, "/metrics")
    assert status == 200
    for name in (
        'vramchat_memory_planned_bytes{device="CPU"}',
        'vramchat_memory_allocated_bytes{device="CPU"}',
        "vramchat_kv_committed_bytes",
        'vramchat_context_cells{state="maximum"} 2048',
        "vramchat_requests_running 0",
        "vramchat_requests_queued 0",
    ):
        assert name in text, name
    served.client().chat.completions.create(model="demo", messages=QUESTION, max_tokens=2)
    after = get(served.port, "/metrics")[1]
    total = 'vramchat_requests_total{endpoint="/v1/chat/completions",status="200"}'
    counted = [line for line in after.splitlines() if line.startswith(total)]
    assert counted and int(counted[0].split()[-1]) >= 1
    assert 'vramchat_tokens_total{kind="completion"}' in after


def test_a_key_is_asked_for_every_request(served: Served) -> None:
    with serving(served.session, api_key="s3cret") as keyed:
        with pytest.raises(openai.AuthenticationError, match="needs an API key"):
            keyed.client(api_key="wrong").models.list()
        assert keyed.client(api_key="s3cret").models.list().data
        assert get(keyed.port, "/metrics")[0] == 401
        assert get(keyed.port, "/metrics", key="s3cret")[0] == 200
        assert get(keyed.port, "/health")[0] == 200  # it says nothing secret


def test_logit_bias_bans_and_forces_tokens(served: Served) -> None:
    client = served.client()
    tokens = served.session.engine.tokenize
    paris = {tokens(word, False, False)[0] for word in ("Paris", " Paris")}  # with its space, and without
    (rome, *_) = tokens("Rome", False, False)
    plain = client.chat.completions.create(model="demo", messages=QUESTION, max_tokens=4, temperature=0)
    assert plain.choices[0].message.content.startswith("Paris")
    banned = client.chat.completions.create(
        model="demo", messages=QUESTION, max_tokens=4, temperature=0, logit_bias=dict.fromkeys(map(str, paris), -100)
    )
    assert not banned.choices[0].message.content.startswith("Paris")
    forced = client.chat.completions.create(
        model="demo", messages=QUESTION, max_tokens=1, temperature=0, logit_bias={str(rome): 100}
    )
    assert forced.choices[0].message.content == "Rome"
    for wrong, words in (
        ({"300000": -100}, "not in the model's vocabulary"),
        ({str(rome): 200}, "from -100 to 100"),
        ({"Rome": 5}, "is not a token id"),
    ):
        with pytest.raises(openai.BadRequestError, match=words):
            client.chat.completions.create(model="demo", messages=QUESTION, max_tokens=2, logit_bias=wrong)
