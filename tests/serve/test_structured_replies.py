"""Replies in JSON (`response_format`): what each format's grammar lets a model write, as llama.cpp's own grammar
sampler reads it (the demo's vocabulary); the demo served for real and asked through the `openai` client's
structured outputs (a pydantic model, streamed, json_object, a completion); a thinking model keeps its
thoughts; and every format a grammar cannot follow is refused in words, the server answering on."""

from __future__ import annotations

import json
from typing import Literal, Optional

import openai
import pytest
from pydantic import BaseModel

from app.serve.errors import ApiError
from app.serve.structured import JsonFormat, json_format, reply_grammar
from tests.support.grammar_check import Vocabulary
from tests.support.serve import Served, post, raw_request, served_file
from tests.support.thinking import write_thinking_model

pytestmark = pytest.mark.llama
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


class Capital(BaseModel):
    city: str
    country: Literal["France", "Italy", "Germany", "Spain"]


class Person(BaseModel):  # recursive, with a nested model: pydantic writes $defs and $ref
    name: str
    friends: list[Person]
    home: Optional[Capital]  # noqa: UP045 - the Optional form pydantic users write


CAPITAL = Capital.model_json_schema()


@pytest.fixture(scope="module")
def served(served_demo: Served) -> Served:
    return served_demo


# -- what a grammar lets a model write ------------------------------------------------------------


def test_a_schema_holds_the_reply_to_its_properties_and_values(vocabulary: Vocabulary) -> None:
    grammar = reply_grammar(JsonFormat(CAPITAL))
    assert vocabulary.allows(grammar, '{"city": "Paris", "country": "France"}')
    assert not vocabulary.allows(grammar, '{"city": "Paris"}')  # a required property missing
    assert not vocabulary.allows(grammar, '{"city": "Paris", "country": "Peru"}')  # not in the enum
    assert not vocabulary.allows(grammar, '{"city": "Paris", "country": "France", "mayor": "x"}')  # no others
    assert not vocabulary.allows(grammar, '{"city": "Paris", "country": "France"', finished=True)  # unclosed
    any_object = reply_grammar(JsonFormat())
    assert vocabulary.allows(any_object, '{"a": [1, 2.5, {"b": null}], "c": "\\u00e9"}')
    assert vocabulary.allows(any_object, "{}")
    assert not vocabulary.allows(any_object, "[1]") and not vocabulary.allows(any_object, '"text"')


def test_a_long_enum_is_held_to_its_values_as_a_trie(vocabulary: Vocabulary) -> None:
    """Its values' shared beginnings are written once (llama.cpp follows each alternative still open: 1,000 values
    side by side wrote 0.7 tokens/s, bench/json_enum.py), and the grammar allows exactly the values."""
    values = [f"Country{i}" for i in range(1000)] + ["", "Côte d'Ivoire", 'say "hi"', 7, None]
    schema = {"type": "object", "properties": {"c": {"enum": values}}, "required": ["c"]}
    grammar = reply_grammar(JsonFormat(schema))
    for value in ("Country0", "Country1", "Country10", "Country999", "", "Côte d'Ivoire", 'say "hi"', 7, None):
        assert vocabulary.allows(grammar, json.dumps({"c": value}, ensure_ascii=False)), value
    for value in ("Country", "Country1000", "Country01", "country1", "Côte", 8, "null"):
        assert not vocabulary.allows(grammar, json.dumps({"c": value}, ensure_ascii=False)), value


def test_references_and_recursion_are_followed(vocabulary: Vocabulary) -> None:
    grammar = reply_grammar(JsonFormat(Person.model_json_schema()))
    ann = {"name": "Ann", "friends": [{"name": "Bo", "friends": [], "home": None}], "home": CAPITAL_OF_ROME}
    assert vocabulary.allows(grammar, json.dumps(ann))
    wrong = {"name": "Ann", "friends": [{"name": "Bo"}], "home": None}  # a friend without friends or home
    assert not vocabulary.allows(grammar, json.dumps(wrong))


CAPITAL_OF_ROME = {"city": "Rome", "country": "Italy"}


def test_a_reasoning_block_the_prompt_opened_is_thought_to_its_end_before_the_json(vocabulary: Vocabulary) -> None:
    grammar = reply_grammar(JsonFormat(CAPITAL), opened_marker="<think>\n")
    answer = '{"city": "Paris", "country": "France"}'
    # the closing marker's own beginnings inside the thoughts do not end them
    thoughts = "Paris < Rome? </th not yet, <</think"
    assert vocabulary.allows(grammar, f"{thoughts}>\n\n{answer}")
    assert not vocabulary.allows(grammar, answer)  # the thoughts come first: the block is open
    assert not vocabulary.allows(grammar, f"{thoughts}> and on", finished=True)
    magistral = reply_grammar(JsonFormat(CAPITAL), opened_marker="[THINK]\n")
    assert vocabulary.allows(magistral, f"hmm [/THINK {answer}[/THINK]\n{answer}")


def test_a_template_that_lets_the_model_think_keeps_the_block_optional(vocabulary: Vocabulary) -> None:
    template = "{% if enable_thinking %}<think>{% endif %}"
    answer = '{"city": "Paris", "country": "France"}'
    grammar = reply_grammar(JsonFormat(CAPITAL), template=template)
    assert vocabulary.allows(grammar, answer)
    assert vocabulary.allows(grammar, f"<think>\nThe capital is Paris.\n</think>\n\n{answer}")
    off = reply_grammar(JsonFormat(CAPITAL), template=template, thinking=False)
    assert not vocabulary.allows(off, f"<think>x</think>{answer}") and vocabulary.allows(off, answer)


# -- formats refused ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"type": "xml"}, '"json_schema"'),
        ("json", '"json_object"'),
        ({"type": "json_schema"}, "under 'schema'"),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": [1]}}, "must be a JSON schema"),
        ({"type": "json_object", "schema": {"enum": ["x" * 70_000]}}, "longer than this server takes"),
    ],
)
def test_a_format_the_server_cannot_read_is_refused_with_its_field(value: object, words: str) -> None:
    with pytest.raises(ApiError) as caught:
        json_format({"response_format": value}, 64 * 1024)
    assert caught.value.status == 400 and words in caught.value.message
    assert (caught.value.param or "").startswith("response_format")


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"$ref": "https://example.com/schema.json"}, "points outside the schema"),
        ({"$ref": "#/$defs/Missing", "$defs": {}}, "points to nothing"),
        ({"anyOf": [{"$ref": "#"}, {"type": "string"}]}, "refers to itself before any value"),
    ],
)
def test_a_schema_no_grammar_can_follow_is_refused(schema: dict, words: str) -> None:
    with pytest.raises(ApiError) as caught:
        reply_grammar(JsonFormat(schema))
    assert caught.value.status == 400 and words in caught.value.message


def test_gpt_oss_is_refused_a_json_format_in_words() -> None:
    with pytest.raises(ApiError) as caught:
        reply_grammar(JsonFormat(), template="<|start|>assistant<|channel|>final<|message|>")
    assert "gpt-oss" in caught.value.message and "ask for JSON in the prompt" in caught.value.message


# -- served ---------------------------------------------------------------------------------------


def test_the_openai_clients_structured_output_parses_into_the_model(served: Served) -> None:
    client = served.client()
    reply = client.chat.completions.parse(
        model="demo", messages=QUESTION, response_format=Capital, max_tokens=40, temperature=0
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(choice.message.parsed, Capital) and choice.message.parsed.city == "Paris"
    chunks = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "Describe Ann and her friends."}],
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": Person.model_json_schema()}},
        max_tokens=120,
        temperature=0,
        frequency_penalty=0.5,  # penalties: they count only the tokens the grammar let through
        stream=True,
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert isinstance(Person.model_validate_json(text), Person)


def test_json_object_and_a_json_completion(served: Served) -> None:
    client = served.client()
    reply = client.chat.completions.create(
        model="demo", messages=QUESTION, response_format={"type": "json_object"}, max_tokens=60
    )
    assert isinstance(json.loads(reply.choices[0].message.content), dict)
    completion = client.completions.create(
        model="demo",
        prompt="The capital of France, as JSON:",
        max_tokens=60,
        temperature=0,
        extra_body={"response_format": {"type": "json_object"}},
    )
    assert completion.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(completion.choices[0].text), dict)


def test_refused_formats_are_answered_in_words_and_the_server_goes_on(served: Served) -> None:
    client = served.client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="demo",
            messages=QUESTION,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/nowhere"}}},
        )
    assert "points to nothing" in str(caught.value)
    # a lone surrogate in a property's name (valid JSON text, not UTF-8) never reaches llama.cpp
    body = (
        b'{"model": "demo", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": '
        b'"json_schema", "json_schema": {"schema": {"type": "object", "properties": {"\\ud800": {}}}}}}'
    )
    status, _, answer = raw_request(served.port, post("/v1/chat/completions", body))
    assert status == 400 and "not UTF-8" in json.loads(answer)["error"]["message"]
    reply = client.chat.completions.create(model="demo", messages=QUESTION, max_tokens=8)
    assert reply.choices[0].message.content.startswith("Paris")


def test_a_thinking_model_thinks_first_and_answers_in_json_without_thoughts(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    path = write_thinking_model(tmp_path_factory.mktemp("thinking") / "tiny-thinking-instruct.gguf")
    yes_or_no = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": yes_or_no}}
    with served_file(path, n_ctx=1024, name="tiny") as s:
        client = s.client()
        # its template opens <think>: the random words think on (the block never closes in 16 tokens), in
        # free text, not in JSON forced into the thoughts
        reply = client.chat.completions.create(
            model="tiny", messages=QUESTION, response_format=fmt, max_tokens=16, temperature=0
        )
        message = reply.choices[0].message
        thought = (message.model_extra or {}).get("reasoning_content") or ""
        assert reply.choices[0].finish_reason == "length" and not message.content
        assert thought and not thought.lstrip().startswith("{")
        # thinking off: the template closes the block itself, and the reply is the JSON
        reply = client.chat.completions.create(
            model="tiny",
            messages=QUESTION,
            response_format=fmt,
            max_tokens=40,
            temperature=0,
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        )
        assert json.loads(reply.choices[0].message.content)["answer"] in ("yes", "no")
