"""GGUF chat templates rendered under a budget they cannot escape: in a child process of their own
(app/conversation/template_child.py: memory and CPU capped by the kernel), killed at a wall-clock deadline.

One child serves every render of this process, started at the first and started again after a kill.
A template that went over its budget once is not run again in this process: `over_budget` says why,
and the caller renders the family's format instead (app/conversation/templates.py).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import selectors
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from app.children import child_env
from app.conversation.template_errors import TemplateError, TemplateOverBudget

DEADLINE_SECONDS = 5.0  # a real template renders in milliseconds; the sandbox's own step clock stops at 2 s
START_SECONDS = 20.0  # starting Python and importing jinja, on a busy machine


class _Renderer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None

    def render(self, request: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(request).encode()
        with self._lock:
            try:
                child = self._started()
            except (OSError, EOFError, ValueError) as exc:
                self._stop()
                raise TemplateError(f"the chat template renderer could not start: {exc!r}") from None
            assert child.stdin is not None and child.stdout is not None
            try:
                deadline = time.monotonic() + DEADLINE_SECONDS
                child.stdin.write(struct.pack(">I", len(data)) + data)
                child.stdin.flush()
                head = self._read(child, 4, deadline)
                (length,) = struct.unpack(">I", head)
                return dict(json.loads(self._read(child, length, deadline)))
            except (OSError, EOFError, ValueError) as exc:
                self._stop()
                reason = "the renderer stopped" if not isinstance(exc, TimeoutError) else str(exc)
                raise TemplateOverBudget(reason) from None

    def _started(self) -> subprocess.Popen[bytes]:
        """The child, started (and its ready frame read) when there is none: its start is not a render's."""
        if self._child is None or self._child.poll() is not None:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "app.conversation.template_child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=child_env(),
            )
            (length,) = struct.unpack(">I", self._read(self._child, 4, time.monotonic() + START_SECONDS))
            self._read(self._child, length, time.monotonic() + START_SECONDS)
        return self._child

    @staticmethod
    def _read(child: subprocess.Popen[bytes], n: int, deadline: float) -> bytes:
        assert child.stdout is not None
        fd = child.stdout.fileno()
        chunks: list[bytes] = []
        left = n
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while left:
                wait = deadline - time.monotonic()
                if wait <= 0 or not selector.select(wait):
                    raise TimeoutError(f"it took longer than {DEADLINE_SECONDS:g} s")
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    raise EOFError
                chunks.append(chunk)
                left -= len(chunk)
        return b"".join(chunks)

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            with contextlib.suppress(OSError):
                child.kill()
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                child.wait(timeout=5)

    def close(self) -> None:
        with self._lock:
            self._stop()


_renderer = _Renderer()
atexit.register(_renderer.close)
_over_budget: dict[str, str] = {}  # sha256 of a template -> why it was stopped


def _key(template: str) -> str:
    return hashlib.sha256(template.encode("utf-8", errors="surrogatepass")).hexdigest()


def over_budget(template: str) -> str:
    """Why `template` was stopped earlier in this process, or ''."""
    return _over_budget.get(_key(template), "")


def render_bounded(
    template: str,
    messages: list[dict[str, Any]],
    bos: str,
    eos: str,
    add_generation_prompt: bool = True,
    switches: Mapping[str, bool | str | int | float] | None = None,  # templates.TemplateValue
    tools: list[dict[str, Any]] | None = None,
) -> str:
    """The rendered prompt. TemplateOverBudget when the template goes over its time or memory (it is
    then remembered: `over_budget`); app.conversation.templates.TemplateError for a template that is broken
    or refuses (its own raise_exception), as the in-process sandbox says."""
    known = over_budget(template)
    if known:
        raise TemplateOverBudget(known)
    request = {
        "template": template,
        "messages": messages,
        "bos": bos,
        "eos": eos,
        "add_generation_prompt": add_generation_prompt,
        "switches": dict(switches or {}),
        "tools": tools or [],
    }
    try:
        answer = _renderer.render(request)
    except TemplateOverBudget as exc:
        _over_budget[_key(template)] = str(exc)
        raise
    if "text" in answer:
        return str(answer["text"])
    if answer.get("budget"):
        _over_budget[_key(template)] = str(answer["error"])
        raise TemplateOverBudget(str(answer["error"]))
    raise TemplateError(str(answer.get("error") or "the chat template failed"))
