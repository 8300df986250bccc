"""Tool calls: a tiny model (random weights) whose chat template declares tools in the Hermes / Qwen format,
served for real: a forced call (`tool_choice` required or one function named) is constrained by a grammar
to the function's JSON schema, so even random weights answer with a call the `openai` client reads; the
call and its result go back into the next prompt as the template writes them. The families' published
formats are parsed from recorded replies."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import openai
import pytest

from app.serve.grammar import Grammar
from app.serve.options import Limits
from app.serve.prompts import chat_prompt
from app.serve.requests import chat_request
from app.serve.tools import GPT_OSS, HERMES, LLAMA3, MISTRAL, family_of, forced_grammar, parse_calls
from tests.support.grammar_check import Vocabulary
from tests.support.serve import Served, load_session, serving

HERMES_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nYou may call functions.\n<tools>\n"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>\n"
    'Call one as <tool_call>\n{"name": <name>, "arguments": <args>}\n</tool_call><|im_end|>\n{% endif %}'
    "{%- for message in messages %}"
    "{%- if message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n"
    "</tool_response><|im_end|>\n"
    "{%- elif message.tool_calls %}<|im_start|>assistant"
    "{%- for call in message.tool_calls %}\n<tool_call>\n"
    '{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}\n</tool_call>'
    "{%- endfor %}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}"
    "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from tests.support.tiny import ZOO, write_tiny_model

    spec = ZOO["qwen2-q4_0"]
    spec = dataclasses.replace(spec, extra_kv={**spec.extra_kv, "tokenizer.chat_template": HERMES_TEMPLATE})
    path = write_tiny_model(tmp_path_factory.mktemp("tools") / "tiny-tools-instruct.gguf", spec)
    session = load_session(path, n_ctx=1024)
    try:
        with serving(session, name="tiny") as s:
            yield s
    finally:
        session.close()


@pytest.mark.llama
def test_a_required_call_comes_back_as_tool_calls(served: Served) -> None:
    reply = served.client().chat.completions.create(
        model="tiny", messages=ASK, tools=[WEATHER, TIME], tool_choice="required", max_tokens=120, temperature=0
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    if call.function.name == "get_weather":
        arguments = json.loads(call.function.arguments)
        assert arguments["city"] in ("Paris", "Rome") and set(arguments) <= {"city", "days"}
    else:
        assert call.function.name == "get_time" and json.loads(call.function.arguments) == {}


@pytest.mark.llama
def test_a_named_function_is_called_when_streamed_too(served: Served) -> None:
    chunks = list(
        served.client().chat.completions.create(
            model="tiny",
            messages=ASK,
            tools=[WEATHER, TIME],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            max_tokens=120,
            stream=True,
        )
    )
    calls = [c for chunk in chunks if chunk.choices for c in (chunk.choices[0].delta.tool_calls or [])]
    assert [c.function.name for c in calls] == ["get_weather"] and calls[0].index == 0
    assert json.loads(calls[0].function.arguments)["city"] in ("Paris", "Rome")
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


@pytest.mark.llama
def test_a_call_and_its_result_go_back_into_the_prompt(served: Served) -> None:
    body = {
        "model": "tiny",
        "tools": [WEATHER],
        "messages": [
            *ASK,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C and sunny"},
        ],
    }
    sent: list[str] = []
    model = served.session.model
    assert model is not None
    chat_prompt(chat_request(body, Limits()), model, lambda text: sent.append(text) or [1, 2], None)
    (text,) = sent
    assert '<tools>\n{"function":' in text or '"name": "get_weather"' in text  # the tools, as the template lists them
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert "<tool_response>\n18 C and sunny\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")
    # and the server answers it (tool_choice none: words, no call)
    reply = served.client().chat.completions.create(max_tokens=3, tool_choice="none", **body)  # type: ignore[arg-type]
    assert reply.choices[0].finish_reason in ("length", "stop") and not reply.choices[0].message.tool_calls


@pytest.mark.llama
def test_unknown_tool_choices_are_refused(served: Served) -> None:
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        served.client().chat.completions.create(
            model="tiny", messages=ASK, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}
        )


@pytest.mark.llama
def test_tools_and_a_json_reply_in_one_request_are_refused_in_words(served: Served) -> None:
    with pytest.raises(openai.BadRequestError, match="a JSON reply or for tool calls, not both"):
        served.client().chat.completions.create(
            model="tiny", messages=ASK, tools=[WEATHER], response_format={"type": "json_object"}
        )
    # with tool_choice none the tools are not offered: the JSON reply is
    reply = served.client().chat.completions.create(
        model="tiny",
        messages=ASK,
        tools=[WEATHER],
        tool_choice="none",
        response_format={"type": "json_object"},
        max_tokens=200,
        temperature=0,
    )
    assert reply.choices[0].message.content.startswith("{") and not reply.choices[0].message.tool_calls


# -- the families' formats, from the replies their models write ---------------------------------------


def test_each_family_is_known_by_its_template() -> None:
    assert family_of(HERMES_TEMPLATE) == HERMES
    assert family_of("{{ tools }}<|start_header_id|>ipython<|end_header_id|><|python_tag|>") == LLAMA3
    assert family_of("{% if tools %}[AVAILABLE_TOOLS]{{ tools }}[/AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS]") == MISTRAL
    assert family_of("{{ tools }}<|channel|>commentary to=functions.{{ name }}") == GPT_OSS
    assert family_of("<start_of_turn>user\n{{ message['content'] }}") is None  # Gemma: no tools


@pytest.mark.parametrize(
    ("family", "reply", "content", "calls"),
    [
        (
            HERMES,
            'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
            "Let me check.",
            [("get_weather", {"city": "Paris"})],
        ),
        (
            HERMES,  # two calls, the second cut off by the end of the reply before its close
            '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n'
            '<tool_call>\n{"name": "b", "arguments": {"x": 1}}',
            "",
            [("a", {}), ("b", {"x": 1})],
        ),
        (
            LLAMA3,
            '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Rome"}}',
            "",
            [("get_weather", {"city": "Rome"})],
        ),
        (
            LLAMA3,
            '{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"n": 2}}',
            "",
            [("a", {}), ("b", {"n": 2})],
        ),
        (
            MISTRAL,
            '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
            "",
            [("get_weather", {"city": "Paris"})],
        ),
        (MISTRAL, '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', "", [("get_weather", {"city": "Paris"})]),
        (
            GPT_OSS,
            "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
            'to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
            "",
            [("get_weather", {"city": "Paris"})],
        ),
        (HERMES, "The weather is fine.", "The weather is fine.", []),
        (HERMES, "<tool_call>\nnot json\n</tool_call>", "<tool_call>\nnot json\n</tool_call>", []),
        (LLAMA3, "Paris is sunny.", "Paris is sunny.", []),
    ],
)
def test_recorded_replies_are_read_as_calls(family: str, reply: str, content: str, calls: list) -> None:
    text, found = parse_calls(family, reply)
    assert text == content
    assert [(c.name, json.loads(c.arguments)) for c in found] == calls


@pytest.mark.llama
def test_a_forced_call_comes_after_the_thoughts_of_a_block_the_prompt_opened(vocabulary: Vocabulary) -> None:
    tools = tuple(chat_request({"messages": ASK, "tools": [WEATHER]}, Limits()).tools)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    opened = forced_grammar(HERMES, tools, "required", opened_marker="<think>\n")
    assert vocabulary.allows(opened, f"Paris, so the weather tool.\n</think>\n\n{call}")
    assert not vocabulary.allows(opened, call)  # it was a call inside the thoughts, read as no call at all
    may_think = forced_grammar(HERMES, tools, "required", template="... <think> ...")
    assert vocabulary.allows(may_think, call) and vocabulary.allows(may_think, f"<think>hm</think>\n{call}")
    assert not vocabulary.allows(forced_grammar(HERMES, tools, "required"), f"<think>hm</think>\n{call}")


def test_a_schema_becomes_grammar_rules_by_its_parts() -> None:
    g = Grammar()
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "n": {"type": ["integer", "null"]},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
            "deep": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
            "any": {},
        },
        "required": ["q"],
    }
    text = g.text(g.schema(schema, "args"))
    assert text.startswith("root ::= args\n")
    assert 'args ::= "{" "\\"q\\": " string ( ", " "\\"n\\": " args-n )?' in text
