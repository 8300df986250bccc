"""A reply in JSON (OpenAI's `response_format`): the format a request asks for, checked, and the grammar that
holds the model's reply to it.

    {"type": "text"}                                      the reply as the model writes it (the default)
    {"type": "json_object"}                               any JSON object
    {"type": "json_schema", "json_schema": {"schema": S}}  a JSON value of schema S (app.serve.grammar's subset;
                                                          `client.chat.completions.parse(response_format=Model)`
                                                          sends a pydantic model's schema so)
    {"type": "json_object", "schema": S}                  the same, as llama.cpp's server also takes it

A reasoning model keeps its thoughts: where the prompt opened a reasoning block, the grammar lets the reply
think up to the block's closing marker before its JSON; where the template lets the model open one itself,
the block is allowed, not required. gpt-oss writes its answer through harmony channels (special tokens a
grammar does not name): a JSON format is refused for it in words.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.serve.errors import bad_request
from app.serve.grammar import Grammar, SchemaError

PARAM = "response_format"
HARMONY = "<|channel|>"  # gpt-oss's templates write it


@dataclass(frozen=True)
class JsonFormat:
    """A reply asked for in JSON: of `schema`, or (None) any JSON object."""

    schema: dict[str, Any] | None = None
    name: str = ""


def json_format(body: dict[str, Any], schema_chars: int) -> JsonFormat | None:
    """The JSON format a request's `response_format` asks for; None for text (or none given)."""
    value = body.get(PARAM)
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        schema = value.get("schema")
        return JsonFormat() if schema is None else JsonFormat(_schema(schema, f"{PARAM}.schema", schema_chars))
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict) or "schema" not in spec:
            raise bad_request(
                f"'{PARAM}.json_schema' must be an object with the schema under 'schema' "
                '({"name": ..., "schema": {...}})',
                param=f"{PARAM}.json_schema",
            )
        name = spec.get("name")
        return JsonFormat(
            _schema(spec["schema"], f"{PARAM}.json_schema.schema", schema_chars), name if isinstance(name, str) else ""
        )
    raise bad_request(
        f'\'{PARAM}\' is {{"type": "text"}}, {{"type": "json_object"}} or '
        '{"type": "json_schema", "json_schema": {"schema": {...}}}',
        param=PARAM,
    )


def _schema(value: Any, param: str, schema_chars: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise bad_request(f"'{param}' must be a JSON schema (an object)", param=param)
    try:
        text = json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")
    except (ValueError, RecursionError):  # a lone surrogate (UnicodeEncodeError is a ValueError), or too deep
        raise bad_request(f"'{param}' holds text that is not UTF-8, or nests too deep", param=param) from None
    if len(text) > schema_chars:
        raise bad_request(f"'{param}' is longer than this server takes ({schema_chars:,} characters)", param=param)
    return value


def reply_grammar(wanted: JsonFormat, opened_marker: str = "", template: str = "", thinking: bool = True) -> str:
    """The grammar of a reply in `wanted`: its JSON, after the thoughts of a reasoning block the prompt opened
    (`opened_marker`, as app.conversation.reasoning.opened_marker gives it) or, `thinking`, that the chat
    `template` lets the model open. A 400 for a schema no grammar can follow, and for gpt-oss."""
    if HARMONY in template:
        raise bad_request(
            "a JSON response_format is not offered for gpt-oss models (they answer through harmony channels): "
            "ask for JSON in the prompt instead",
            param=PARAM,
        )
    g = Grammar(wanted.schema)
    try:
        value = g.schema(wanted.schema, "reply") if wanted.schema is not None else "object"
    except SchemaError as exc:
        raise bad_request(f"'{PARAM}': {exc}", param=PARAM) from None
    return g.text(g.after_thoughts(value, opened_marker, template if thinking else ""))
