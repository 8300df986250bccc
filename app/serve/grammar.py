"""A JSON schema as a GBNF grammar (llama.cpp's grammar format): a forced tool call's arguments, a reply in a
JSON `response_format`.

The subset tool parameters and structured replies use: objects (required properties always, in the schema's
order; optional ones after them; no others), strings (with `enum` or `const`), numbers, integers, booleans,
null, arrays of items, `enum` of any JSON values, `anyOf` / `oneOf`, a one-schema `allOf`, type lists, and
`$ref` to a definition within the schema (`#/$defs/NAME`, as pydantic writes nested models; recursion
included). Other keywords (lengths, patterns, formats, bounds) are not enforced: the value keeps its type;
a value with no type of the subset accepts any JSON value. The JSON is written compactly with one space
after ':' and ',' (as the families' own examples do), so that a model's most likely spacing is never
refused. Each rule is named after where it is in the schema.
"""

from __future__ import annotations

import json
import re
from typing import Any

from app.conversation.reasoning import THINK_PAIRS

MAX_DEPTH = 16  # a deeper schema is not followed further: its values are any JSON
_GAP = r"[ \t\n]{0,8}"  # between a reasoning block and what follows it: the blank lines the families write

_BASE = r"""
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ( string ": " value ( ", " string ": " value )* )? "}"
array ::= "[" ( value ( ", " value )* )? "]"
"""


class SchemaError(ValueError):
    """A schema no grammar can follow (a `$ref` to nowhere, or to itself before any value)."""


def literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def one_of(texts: list[str]) -> str:
    """A GBNF expression for any one of `texts`, their shared beginnings written once (a trie).

    llama.cpp's grammar sampler follows every alternative still open at once: 200 enum values written side by side
    are 200 of them at each token (the demo wrote 13 tokens in 3.5 s, 1,000 values 16.5 s); as a trie, only the
    few that differ at the next character. Texts too long for the trie's depth are written side by side."""
    texts = list(dict.fromkeys(texts))
    if len(texts) < 2 or max(map(len, texts)) > _TRIE_DEPTH:
        return " | ".join(literal(t) for t in texts)
    trie: dict[str, Any] = {}
    for text in texts:
        node = trie
        for c in text:
            node = node.setdefault(c, {})
        node[""] = {}  # a text ends here
    return _trie_expression(trie)


_TRIE_DEPTH = 200  # characters: deeper, the nesting of one_of's expression would be as deep


def _trie_expression(node: dict[str, Any]) -> str:
    """The alternatives below `node`, each a run of characters without a branch, then what follows it."""
    ends = "" in node
    options = []
    for c, child in node.items():
        if c == "":
            continue
        run = c
        while len(child) == 1 and "" not in child:
            ((c, child),) = child.items()
            run += c
        rest = _trie_expression(child) if child.keys() - {""} else ""
        options.append(f"{literal(run)} {rest}".strip())
    body = options[0] if len(options) == 1 and not ends else "( " + " | ".join(options) + " )"
    return f"{body}?" if ends else body


def _char_class(chars: str, negated: bool = False) -> str:
    inside = "".join("\\" + c if c in "\\]^-[" else c for c in dict.fromkeys(chars))
    return f"[{'^' if negated else ''}{inside}]"


class Grammar:
    """Rules collected while schemas are turned into grammar; `text(root)` is the whole grammar.
    `document`: the schema `$ref`s point into (a tool's parameters, a response format's schema)."""

    def __init__(self, document: Any = None) -> None:
        self.rules: dict[str, str] = {}
        self.document = document
        # a definition being written -> how many objects and arrays had been entered when it began: a `$ref`
        # back to it from within one of them is recursion a grammar can follow; from outside every one of them
        # it would be a rule that starts with itself, which llama.cpp refuses
        self._pending: dict[str, int] = {}
        self._nesting = 0
        self._references: dict[str, str] = {}  # a `$ref` -> its definition's rule

    def rule(self, name: str, body: str) -> str:
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-").lower() or "r"
        base, n = name, 2
        while name in self.rules and self.rules[name] != body:
            name, n = f"{base}-{n}", n + 1
        self.rules[name] = body
        return name

    def schema(self, schema: Any, name: str, depth: int = 0) -> str:
        """A rule for values of `schema`, its name returned."""
        if not isinstance(schema, dict) or depth > MAX_DEPTH:
            return "value"
        if isinstance(schema.get("$ref"), str):
            return self._reference(schema["$ref"], depth)
        if "const" in schema:
            return self.rule(name, literal(json.dumps(schema["const"], ensure_ascii=False)))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self.rule(name, one_of([json.dumps(v, ensure_ascii=False) for v in schema["enum"]]))
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                parts = [self.schema(s, f"{name}-{i}", depth + 1) for i, s in enumerate(schema[key])]
                return self.rule(name, " | ".join(parts))
        every = schema.get("allOf")
        if isinstance(every, list) and len(every) == 1:
            return self.schema(every[0], name, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            parts = [self.schema({**schema, "type": k}, f"{name}-{k}", depth + 1) for k in kind if isinstance(k, str)]
            return self.rule(name, " | ".join(parts)) if parts else "value"
        if kind == "object" or (kind is None and isinstance(schema.get("properties"), dict)):
            return self._object(schema, name, depth)
        if kind == "array":
            self._nesting += 1
            items = self.schema(schema.get("items"), f"{name}-item", depth + 1)
            self._nesting -= 1
            return self.rule(name, f'"[" ( {items} ( ", " {items} )* )? "]"')
        return {"string": "string", "number": "number", "integer": "integer", "boolean": "boolean", "null": "null"}.get(
            str(kind), "value"
        )

    def _reference(self, ref: str, depth: int) -> str:
        """The rule of the definition `ref` points to (`#`, `#/$defs/NAME`, any JSON pointer in the document),
        written once however often it is used."""
        if not ref.startswith("#"):
            raise SchemaError(f"$ref {ref!r} points outside the schema: only references within it (#/...) are read")
        target: Any = self.document
        for part in [p for p in ref[1:].split("/") if p]:
            key = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and key in target:
                target = target[key]
            elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
                target = target[int(key)]
            else:
                raise SchemaError(f"$ref {ref!r} points to nothing in the schema")
        name = "ref-" + (ref.rstrip("/").rsplit("/", 1)[-1] if ref != "#" else "root")
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-").lower()
        if ref in self._pending and self._pending[ref] == self._nesting:
            raise SchemaError(f"$ref {ref!r} refers to itself before any value is written")
        if ref in self._references:
            return self._references[ref]
        written = self.rule(name, "")  # reserved: a recursive use names it before its body is known
        self._references[ref] = written
        self._pending[ref] = self._nesting
        try:
            self.rules[written] = self.schema(target, f"{written}-def", depth + 1)
        finally:
            del self._pending[ref]
        return written

    def _object(self, schema: dict[str, Any], name: str, depth: int) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return "object"
        required = [k for k in schema.get("required", []) if isinstance(k, str) and k in properties]
        optional = [k for k in properties if k not in required]
        pairs = {}
        self._nesting += 1
        for key in properties:
            value = self.schema(properties[key], f"{name}-{key}", depth + 1)
            pairs[key] = f"{literal(json.dumps(key, ensure_ascii=False) + ': ')} {value}"
        self._nesting -= 1
        if required:
            body = ' ", " '.join(pairs[k] for k in required)
            body += "".join(f' ( ", " {pairs[k]} )?' for k in optional)
            return self.rule(name, f'"{{" {body} "}}"')
        # no required property: the object may be empty, or start with any one of them
        first = " | ".join(
            pairs[k] + "".join(f' ( ", " {pairs[o]} )?' for o in optional[i + 1 :]) for i, k in enumerate(optional)
        )
        return self.rule(name, f'"{{" ( {first} )? "}}"')

    def until(self, name: str, marker: str) -> str:
        """A rule for any text up to and including the first `marker` (a reasoning block's closing marker): one
        rule per character of the marker matched so far, as a string search steps through it."""
        states = [f"{name}-{i}" for i in range(len(marker))]
        for i, state in enumerate(states):
            # after the first i characters of the marker: its next one goes on (or ends it); any other
            # character starts the search again, from the longest prefix of the marker it completes
            options = [literal(marker[i]) + (f" {states[i + 1]}" if i + 1 < len(marker) else "")]
            restarts: dict[str, int] = {}
            for c in dict.fromkeys(marker):
                if c != marker[i]:
                    seen = marker[:i] + c
                    restarts[c] = next(k for k in range(len(seen), -1, -1) if marker.startswith(seen[len(seen) - k :]))
            for c, k in restarts.items():
                options.append(literal(c) + f" {states[k]}")
            options.append(f"{_char_class(marker, negated=True)} {states[0]}")
            self.rules[state] = " | ".join(options)
        return states[0]

    def after_thoughts(self, value: str, opened_marker: str = "", template: str = "") -> str:
        """`value` (a rule or an expression) after a reasoning model's thoughts: up to the closing marker of
        the block the prompt opened (`opened_marker`, as app.conversation.reasoning.opened_marker gives it), or
        a block the chat `template` lets the model open itself, allowed and not required; else `value` alone."""
        opened = opened_marker.strip()
        for opening, closing in THINK_PAIRS:
            if opened == opening:
                return f"{self.until('thoughts', closing)} {_GAP} ( {value} )"
        blocks = [(opening, closing) for opening, closing in THINK_PAIRS if template and opening in template]
        if not blocks:
            return value
        heads = " | ".join(
            f"{literal(opening)} {self.until(f'thoughts-{i}', closing)}" for i, (opening, closing) in enumerate(blocks)
        )
        return f"( ( {heads} ) {_GAP} )? ( {value} )"

    def text(self, root: str) -> str:
        lines = [f"root ::= {root}"] + [f"{n} ::= {b}" for n, b in self.rules.items()]
        return "\n".join(lines) + "\n" + _BASE.strip() + "\n"
