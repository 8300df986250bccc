"""A JSON schema as a GBNF grammar (llama.cpp's grammar format), for a forced tool call's arguments.

The subset tool parameters use: objects (required properties always, in the schema's order; optional ones
after them), strings (with `enum` or `const`), numbers, integers, booleans, null, arrays of items,
`enum` of any JSON values, `anyOf` / `oneOf` and type lists. Anything else accepts any JSON value. The
JSON is written compactly with one space after ':' and ',' (as the families' own examples do), so that a
model's most likely spacing is never refused. Each rule is named after where it is in the schema.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 16  # a deeper schema is not followed further: its values are any JSON

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


def literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


class Grammar:
    """Rules collected while schemas are turned into grammar; `text(root)` is the whole grammar."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

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
        if "const" in schema:
            return self.rule(name, literal(json.dumps(schema["const"], ensure_ascii=False)))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            options = " | ".join(literal(json.dumps(v, ensure_ascii=False)) for v in schema["enum"])
            return self.rule(name, options)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                parts = [self.schema(s, f"{name}-{i}", depth + 1) for i, s in enumerate(schema[key])]
                return self.rule(name, " | ".join(parts))
        kind = schema.get("type")
        if isinstance(kind, list):
            parts = [self.schema({**schema, "type": k}, f"{name}-{k}", depth + 1) for k in kind if isinstance(k, str)]
            return self.rule(name, " | ".join(parts)) if parts else "value"
        if kind == "object" or (kind is None and isinstance(schema.get("properties"), dict)):
            return self._object(schema, name, depth)
        if kind == "array":
            items = self.schema(schema.get("items"), f"{name}-item", depth + 1)
            return self.rule(name, f'"[" ( {items} ( ", " {items} )* )? "]"')
        return {"string": "string", "number": "number", "integer": "integer", "boolean": "boolean", "null": "null"}.get(
            str(kind), "value"
        )

    def _object(self, schema: dict[str, Any], name: str, depth: int) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return "object"
        required = [k for k in schema.get("required", []) if isinstance(k, str) and k in properties]
        optional = [k for k in properties if k not in required]
        pairs = {}
        for key in properties:
            value = self.schema(properties[key], f"{name}-{key}", depth + 1)
            pairs[key] = f"{literal(json.dumps(key, ensure_ascii=False) + ': ')} {value}"
        if required:
            body = ' ", " '.join(pairs[k] for k in required)
            body += "".join(f' ( ", " {pairs[k]} )?' for k in optional)
            return self.rule(name, f'"{{" {body} "}}"')
        # no required property: the object may be empty, or start with any one of them
        first = " | ".join(
            pairs[k] + "".join(f' ( ", " {pairs[o]} )?' for o in optional[i + 1 :]) for i, k in enumerate(optional)
        )
        return self.rule(name, f'"{{" ( {first} )? "}}"')

    def text(self, root: str) -> str:
        lines = [f"root ::= {root}"] + [f"{n} ::= {b}" for n, b in self.rules.items()]
        return "\n".join(lines) + "\n" + _BASE.strip() + "\n"
