"""A reply's text as OpenAI's API answers it: a chat message (its reasoning in `reasoning_content`, as
llama.cpp's server gives it, and its tool calls), a completion, their streamed chunks, usage and timings.

`ChatStream` turns the pieces of a reply into chunk deltas as they come: reasoning and answer told apart
as the chat tells them (app.conversation.reasoning.ReplySplitter); with tools offered, the answer is held until the
reply ends, when its calls are read out of it (app/serve/tools.py) and sent as `tool_calls`.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from app.conversation.reasoning import OPEN_MARKER, ReplySplitter, split_reply
from app.engine.types import GenerationStats, TokenLogprob
from app.serve.tools import ToolCall, parse_calls

FINISH = {"eos": "stop", "stop": "stop", "user": "stop", "length": "length", "context": "length"}


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def usage(stats: GenerationStats) -> dict[str, int]:
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.generated_tokens,
        "total_tokens": stats.prompt_tokens + stats.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.reused_tokens},  # type: ignore[dict-item]
    }


def _token(text: bytes, logprob: float) -> dict[str, Any]:
    """A token as OpenAI's logprobs write it: its text, log-probability and bytes (a token may hold part of a
    character: the bytes are what it holds, the text its readable form)."""
    return {"token": text.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(text)}


def chat_logprobs(entries: list[TokenLogprob]) -> dict[str, Any]:
    """A chat choice's `logprobs`: each token, with the likeliest tokens beside it."""
    content = [{**_token(text, lp), "top_logprobs": [_token(t, p) for t, p in top]} for text, lp, top in entries]
    return {"content": content, "refusal": None}


def completion_logprobs(entries: list[TokenLogprob], offset: int) -> dict[str, Any]:
    """A completion choice's `logprobs`, in the completions API's own shape; `offset`: where the first token's
    text starts in the completion."""
    tokens, offsets = [], []
    for text, _, _ in entries:
        tokens.append(text.decode("utf-8", errors="replace"))
        offsets.append(offset)
        offset += len(tokens[-1])
    return {
        "tokens": tokens,
        "token_logprobs": [lp for _, lp, _ in entries],
        "top_logprobs": [{t.decode("utf-8", errors="replace"): p for t, p in top} for _, _, top in entries],
        "text_offset": offsets,
    }


def timings(stats: GenerationStats) -> dict[str, float]:
    """llama.cpp's server's `timings`: what a client that reads them (many local front ends do) expects."""
    read = stats.prompt_tokens - stats.reused_tokens
    return {
        "prompt_n": read,
        "prompt_ms": round(stats.prompt_seconds * 1000, 3),
        "prompt_per_second": round(stats.prompt_tokens_per_second, 3),
        "predicted_n": stats.generated_tokens,
        "predicted_ms": round(stats.generation_seconds * 1000, 3),
        "predicted_per_second": round(stats.tokens_per_second, 3),
        "cache_n": stats.reused_tokens,
    }


class ChatStream:
    """One chat reply, piece by piece."""

    def __init__(self, model: str, opened_reasoning: bool, tool_family: str | None, logprobs: bool = False) -> None:
        self.id = new_id("chatcmpl")
        self.created = int(time.time())
        self.model = model
        self.tool_family = tool_family
        self.logprobs = logprobs  # each token's log-probability asked for
        self._unsent: list[TokenLogprob] = []  # the tokens' log-probabilities not yet on a chunk
        self._splitter = ReplySplitter()
        self._opened = opened_reasoning
        if opened_reasoning:
            self._splitter.feed(OPEN_MARKER)
        self.raw = OPEN_MARKER if opened_reasoning else ""
        self._started = False  # the answer's first text was sent

    # -- streaming ---------------------------------------------------------------------------------

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "vramchat",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def first(self) -> dict[str, Any]:
        return self.chunk({"role": "assistant", "content": ""})

    def feed(self, piece: str, logprobs: list[TokenLogprob] | tuple[()] = ()) -> list[dict[str, Any]]:
        """The chunks for a new piece of the reply (none while a marker is still unsure); the piece's tokens'
        log-probabilities go on the first chunk sent from now on."""
        self.raw += piece
        self._unsent += logprobs
        reasoning, answer = self._splitter.feed(piece)
        out = []
        if reasoning:
            out.append(self.chunk({"reasoning_content": reasoning}))
        if answer and self.tool_family is None:
            answer = self._lead(answer)
            if answer:
                out.append(self.chunk({"content": answer}))
        return self._with_logprobs(out)

    def _with_logprobs(self, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if chunks and self.logprobs and self._unsent:
            chunks[0]["choices"][0]["logprobs"] = chat_logprobs(self._unsent)
            self._unsent = []
        return chunks

    def _lead(self, answer: str) -> str:
        """The answer's first text without the space a model writes before it (as the chat shows it)."""
        if not self._started:
            answer = answer.lstrip()
            self._started = bool(answer)
        return answer

    def last(self, stats: GenerationStats) -> list[dict[str, Any]]:
        """What is left when the reply ended: held text, the tool calls, the finish reason."""
        reasoning, answer = self._splitter.feed("", final=True)
        out = []
        if reasoning:
            out.append(self.chunk({"reasoning_content": reasoning}))
        finish = FINISH.get(stats.stopped_by, "stop")
        if self.tool_family is None:
            answer = self._lead(answer)
            if answer:
                out.append(self.chunk({"content": answer}))
        else:
            content, calls = parse_calls(self.tool_family, self._splitter.split.answer)
            if content:
                out.append(self.chunk({"content": content}))
            if calls:
                out.append(self.chunk({"tool_calls": [dict(_indexed(c, i)) for i, c in enumerate(calls)]}))
                finish = "tool_calls"
        out.append(self.chunk({}, finish))
        return self._with_logprobs(out)

    def usage_chunk(self, stats: GenerationStats) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage(stats),
            "timings": timings(stats),
        }

    # -- the whole answer --------------------------------------------------------------------------

    def whole(self, stats: GenerationStats) -> dict[str, Any]:
        split = split_reply(self.raw)
        answer = split.answer.strip()
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        if split.reasoning:
            message["reasoning_content"] = split.reasoning
        finish = FINISH.get(stats.stopped_by, "stop")
        if self.tool_family is not None:
            content, calls = parse_calls(self.tool_family, answer)
            if calls:
                message["content"] = content or None
                message["tool_calls"] = [c.to_json() for c in calls]
                finish = "tool_calls"
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "vramchat",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": chat_logprobs(stats.logprobs) if self.logprobs else None,
                    "finish_reason": finish,
                }
            ],
            "usage": usage(stats),
            "timings": timings(stats),
        }


def _indexed(call: ToolCall, index: int) -> dict[str, Any]:
    return {"index": index, **call.to_json()}


class CompletionStream:
    """One completion, piece by piece."""

    def __init__(self, model: str, logprobs: bool = False) -> None:
        self.id = new_id("cmpl")
        self.created = int(time.time())
        self.model = model
        self.text = ""
        self.logprobs = logprobs
        self._offset = 0  # where the next token's text starts

    def chunk(self, text: str, finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "vramchat",
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
        }

    def feed(self, piece: str, logprobs: list[TokenLogprob] | tuple[()] = ()) -> list[dict[str, Any]]:
        self.text += piece
        chunk = self.chunk(piece)
        if self.logprobs:
            chunk["choices"][0]["logprobs"] = completion_logprobs(list(logprobs), self._offset)
            self._offset += sum(len(text.decode("utf-8", errors="replace")) for text, _, _ in logprobs)
        return [chunk]

    def last(self, stats: GenerationStats) -> list[dict[str, Any]]:
        return [self.chunk("", FINISH.get(stats.stopped_by, "stop"))]

    def usage_chunk(self, stats: GenerationStats) -> dict[str, Any]:
        return {**self.chunk(""), "choices": [], "usage": usage(stats), "timings": timings(stats)}

    def whole(self, stats: GenerationStats) -> dict[str, Any]:
        answer = self.chunk(self.text, FINISH.get(stats.stopped_by, "stop"))
        if self.logprobs:
            answer["choices"][0]["logprobs"] = completion_logprobs(stats.logprobs, 0)
        return {**answer, "usage": usage(stats), "timings": timings(stats)}


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()
