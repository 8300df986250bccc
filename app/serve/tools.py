"""Tool calls: which published format a model's chat template speaks, the calls read out of its reply,
and the grammar that makes a forced call (`tool_choice` required, or one function named) come out whole.

The families and how they write a call, as their model cards and templates publish it:

    hermes   Qwen 2.5 / 3, Hermes, and others:  <tool_call>{"name": ..., "arguments": {...}}</tool_call>
    llama3   Llama 3.1-3.3:                     {"name": ..., "parameters": {...}}  (after <|python_tag|> at times)
    mistral  Mistral, Mixtral, Ministral:       [TOOL_CALLS][{"name": ..., "arguments": {...}}]
                                                (or [TOOL_CALLS]name[ARGS]{...} in the newer tokenizers)
    gpt-oss  gpt-oss (harmony):                 <|channel|>commentary to=functions.NAME <|constrain|>json
                                                <|message|>{...}<|call|>

A template that speaks none of them takes no tools here: such a request is refused in words.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from app.serve.grammar import Grammar, literal
from app.serve.requests import Tool

HERMES, LLAMA3, MISTRAL, GPT_OSS = "hermes", "llama3", "mistral", "gpt-oss"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as OpenAI sends it

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def family_of(template: str) -> str | None:
    """The tool-call format a chat template speaks, or None when it takes no tools."""
    if "tools" not in template:
        return None
    if "<|channel|>" in template and "functions" in template:
        return GPT_OSS
    if "<tool_call>" in template:
        return HERMES
    if "[TOOL_CALLS]" in template or "[AVAILABLE_TOOLS]" in template:
        return MISTRAL
    if "<|start_header_id|>" in template and ("<|python_tag|>" in template or '"parameters"' in template):
        return LLAMA3
    return None


def _call_id() -> str:
    return "call_" + secrets.token_hex(12)


def _arguments(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return None


def _from_object(obj: Any, keys: tuple[str, ...] = ("arguments", "parameters")) -> ToolCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    for key in keys:
        if key in obj:
            arguments = _arguments(obj[key])
            return ToolCall(_call_id(), obj["name"], arguments) if arguments is not None else None
    return ToolCall(_call_id(), obj["name"], "{}")


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)
_MISTRAL_NAMED = re.compile(r"\[TOOL_CALLS\]\s*([\w.-]+)\s*\[ARGS\]\s*(\{.*?\})(?=\s*\[TOOL_CALLS\]|\s*\Z)", re.S)
_GPT_OSS = re.compile(
    r"to=functions\.([\w.-]+)[^<]*(?:<\|constrain\|>\s*\w+\s*)?<\|message\|>(.*?)(?:<\|call\|>|\Z)", re.S
)
_GPT_OSS_FINAL = re.compile(r"<\|channel\|>final<\|message\|>(.*?)(?:<\|end\|>|<\|return\|>|\Z)", re.S)


def parse_calls(family: str | None, text: str) -> tuple[str, list[ToolCall]]:
    """(the reply's text outside its calls, the calls); text that does not parse stays text."""
    if family == HERMES:
        calls = [c for c in (_from_object(_json(m.group(1))) for m in _HERMES.finditer(text)) if c]
        return (_HERMES.sub("", text).strip() if calls else text), calls
    if family == LLAMA3:
        body = text.strip().removeprefix("<|python_tag|>").strip()
        parts = [_from_object(_json(part)) for part in body.split(";")] if body.startswith("{") else []
        if parts and all(parts):
            return "", [c for c in parts if c]
        return text, []
    if family == MISTRAL:
        named = [ToolCall(_call_id(), m.group(1), m.group(2)) for m in _MISTRAL_NAMED.finditer(text)]
        if named and all(_json(c.arguments) is not None for c in named):
            return text[: text.find("[TOOL_CALLS]")].strip(), named
        at = text.find("[TOOL_CALLS]")
        head, body = (text[:at], text[at + len("[TOOL_CALLS]") :]) if at >= 0 else ("", text)
        listed = _json(body.strip()) if body.strip().startswith("[") else None
        if isinstance(listed, list) and listed:
            found = [_from_object(o) for o in listed]
            calls = [c for c in found if c is not None]
            if len(calls) == len(found):
                return head.strip(), calls
        return text, []
    if family == GPT_OSS:
        calls = [ToolCall(_call_id(), m.group(1), m.group(2).strip()) for m in _GPT_OSS.finditer(text)]
        if not calls:
            return text, []
        final = _GPT_OSS_FINAL.search(text)
        return (final.group(1).strip() if final else ""), calls
    return text, []


def forced_grammar(
    family: str, tools: tuple[Tool, ...], choice: str, opened_marker: str = "", template: str = ""
) -> str:
    """The grammar of one call to one of `tools` (or to the function `choice` names), in the family's
    format, after a reasoning model's thoughts (Grammar.after_thoughts: the block the prompt opened, or one
    the `template` lets the model open); ValueError for a family whose calls go through special tokens a
    grammar cannot name."""
    named = choice.removeprefix("function:") if choice.startswith("function:") else None
    chosen = [t for t in tools if named is None or t.name == named]
    key = "parameters" if family == LLAMA3 else "arguments"
    g = Grammar()
    calls = []
    for i, tool in enumerate(chosen):
        arguments = g.schema(tool.parameters, f"t{i}-args")
        if arguments not in g.rules and arguments != "object":  # arguments are an object, whatever the schema
            arguments = "object"
        head = literal('{"name": ' + json.dumps(tool.name) + f', "{key}": ')
        calls.append(g.rule(f"t{i}-call", f'{head} {arguments} "}}"'))
    call = g.rule("call", " | ".join(calls))
    if family == HERMES:
        return g.text(g.after_thoughts(f'"<tool_call>\\n" {call} "\\n</tool_call>"', opened_marker, template))
    if family == LLAMA3:
        return g.text(g.after_thoughts(call, opened_marker, template))
    if family == MISTRAL:
        return g.text(g.after_thoughts(f'"[" {call} "]"', opened_marker, template))
    raise ValueError(f"a forced call is not offered for {family} models: use tool_choice auto")
