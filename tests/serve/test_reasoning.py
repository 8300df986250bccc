"""A thinking model over the API: its thoughts arrive in `reasoning_content` (as llama.cpp's server gives
them), plain and streamed, and `chat_template_kwargs.enable_thinking: false` reaches its template. The
tiny model's template opens `<think>` itself; its random words never close it, so all it writes is thought."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.serve.errors import ApiError
from tests.support.serve import Served, load_session, serving
from tests.support.thinking import write_thinking_model

pytestmark = pytest.mark.llama
ASK = [{"role": "user", "content": "What is 7 times 8?"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path = write_thinking_model(tmp_path_factory.mktemp("thinking") / "tiny-thinking-instruct.gguf")
    session = load_session(path, n_ctx=1024)
    try:
        with serving(session, name="tiny") as s:
            yield s
    finally:
        session.close()


def test_thoughts_come_as_reasoning_content(served: Served) -> None:
    client = served.client()
    reply = client.chat.completions.create(model="tiny", messages=ASK, max_tokens=12, temperature=0)
    message = reply.choices[0].message
    thought = getattr(message, "reasoning_content", None) or (message.model_extra or {}).get("reasoning_content")
    assert thought and len(thought) > 10 and not message.content  # all thought: the block never closed
    assert "<think>" not in thought
    chunks = list(client.chat.completions.create(model="tiny", messages=ASK, max_tokens=12, temperature=0, stream=True))
    streamed = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices
    )
    assert streamed == thought
    assert not "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_thinking_off_reaches_the_template(served: Served) -> None:
    reply = served.client().chat.completions.create(
        model="tiny",
        messages=ASK,
        max_tokens=12,
        temperature=0,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    message = reply.choices[0].message
    assert message.content and not (message.model_extra or {}).get("reasoning_content")


EFFORT_TEMPLATE = (
    "Reasoning: {{ reasoning_effort | default('medium') }}{% if persona %} as {{ persona }}{% endif %};"
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}assistant:"
)


def test_reasoning_effort_and_template_variables_reach_the_template(served: Served) -> None:
    """OpenAI's reasoning_effort is the variable gpt-oss's template reads; chat_template_kwargs are passed on
    as llama.cpp's server passes them (they were dropped, all but enable_thinking)."""
    import dataclasses

    from app.serve.options import Limits
    from app.serve.prompts import chat_prompt
    from app.serve.requests import chat_request

    model = served.session.model
    assert model is not None
    model = dataclasses.replace(model, fmt=dataclasses.replace(model.fmt, template=EFFORT_TEMPLATE))

    def rendered(body: dict) -> str:
        sent: list[str] = []
        chat_prompt(chat_request({"messages": ASK, **body}, Limits()), model, lambda t: sent.append(t) or [1], None)
        return sent[0]

    assert rendered({}).startswith("Reasoning: medium;")
    assert rendered({"reasoning_effort": "high"}).startswith("Reasoning: high;")
    both = {"reasoning_effort": "high", "chat_template_kwargs": {"reasoning_effort": "low", "persona": "a pirate"}}
    assert rendered(both).startswith("Reasoning: low as a pirate;")  # the template's own variable wins
    for wrong, param in (
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs.messages"),
        ({"chat_template_kwargs": {"persona": {"nested": 1}}}, "chat_template_kwargs.persona"),
        ({"chat_template_kwargs": {"enable_thinking": "no"}}, "chat_template_kwargs.enable_thinking"),
        ({"chat_template_kwargs": "high"}, "chat_template_kwargs"),
    ):
        with pytest.raises(ApiError) as caught:
            rendered(wrong)
        assert caught.value.status == 400 and caught.value.param == param, wrong
    # over the wire, the same
    reply = served.client().chat.completions.create(model="tiny", messages=ASK, max_tokens=2, reasoning_effort="low")
    assert reply.choices[0].finish_reason in ("length", "stop")
