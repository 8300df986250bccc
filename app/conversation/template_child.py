"""The process a GGUF chat template is rendered in (`python -m app.conversation.template_child`).

Jinja's sandbox bounds what a template can reach, not what it costs: a loop over a long string, a big
integer power or a string multiplied a billion times runs in C where no step counter sees it. Here the
kernel bounds it: the address space is capped (a template that asks for more gets MemoryError), no file
can be written, and each render may use a few seconds of CPU before SIGXCPU ends the process, even if
the app that asked is gone. The app kills it at a wall-clock deadline too (app/conversation/template_sandbox.py).

Requests and answers are JSON, each behind a 4-byte big-endian length, on stdin and stdout.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import sys
from typing import Any

MEMORY_LIMIT = 1 << 30  # address space: jinja and a 4 MiB prompt need under 100 MiB
CPU_SECONDS_PER_RENDER = 10


def _limit_self() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _cpu_budget() -> None:
    """Allow this render CPU_SECONDS_PER_RENDER more seconds of CPU than used so far (the soft limit)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = int(used.ru_utime + used.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = spent + CPU_SECONDS_PER_RENDER
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def read_frame(stream: int) -> bytes | None:
    head = _read_exactly(stream, 4)
    if head is None:
        return None
    (length,) = struct.unpack(">I", head)
    return _read_exactly(stream, length)


def _read_exactly(stream: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(stream, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def frame(payload: dict[str, object]) -> bytes:
    data = json.dumps(payload).encode()
    return struct.pack(">I", len(data)) + data


def _answer(request: dict[str, object]) -> dict[str, object]:
    from app.conversation.templates import TemplateBudgetError, TemplateError, render_jinja

    raw = request.get("messages")
    messages = [_message(m) for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
    tools = request.get("tools")
    wanted = request.get("switches")
    kept = (bool, str, int, float)  # app.conversation.templates.TemplateValue
    switches = {str(k): v for k, v in wanted.items() if isinstance(v, kept)} if isinstance(wanted, dict) else {}
    try:
        text = render_jinja(
            str(request["template"]),
            messages,
            str(request.get("bos", "")),
            str(request.get("eos", "")),
            bool(request.get("add_generation_prompt", True)),
            switches,
            [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else None,
        )
    except MemoryError:
        return {"error": f"it asked for more than {MEMORY_LIMIT >> 20} MiB of memory", "budget": True}
    except TemplateError as exc:
        return {"error": str(exc), "budget": isinstance(exc, TemplateBudgetError)}
    return {"text": text}


def _message(m: dict[str, Any]) -> dict[str, Any]:
    """A message as the template reads it: role and content, and a server's tool calls and results."""
    extra = {k: m[k] for k in ("tool_calls", "tool_call_id", "name") if m.get(k)}
    return {"role": str(m.get("role", "")), "content": str(m.get("content") or ""), **extra}


def main() -> None:
    _limit_self()
    stdin, stdout = sys.stdin.fileno(), sys.stdout.buffer
    import jinja2.sandbox  # noqa: F401  (imported before the first request, not within its deadline)

    stdout.write(frame({"ready": True}))
    stdout.flush()

    while (request := read_frame(stdin)) is not None:
        _cpu_budget()
        try:
            answer = _answer(json.loads(request))
        except MemoryError:
            answer = {"error": f"it asked for more than {MEMORY_LIMIT >> 20} MiB of memory", "budget": True}
        stdout.write(frame(answer))
        stdout.flush()


if __name__ == "__main__":
    main()
