"""The routes, on Starlette: OpenAI's `/v1/models`, `/v1/chat/completions`, `/v1/completions`, and
`/health` and `/metrics` beside them.

A request goes: the key checked, the body read within its limits and checked field by field, its turn
waited for (app/serve/lanes.py), its prompt made and its reply run in worker threads (app/serve/runner.py),
the answer written as it comes. A client that goes away stops its reply at once and frees its slot; every
refusal is an OpenAI-style error body, and nothing a client sends ends the server.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from app.serve.auth import check_key
from app.serve.body import read_json
from app.serve.errors import ApiError
from app.serve.lanes import Lanes
from app.serve.log import request_line
from app.serve.metrics import render_metrics
from app.serve.monitor import Monitor
from app.serve.options import ServeOptions
from app.serve.prompts import Prepared
from app.serve.replies import ChatStream, CompletionStream, sse
from app.serve.requests import chat_request, completion_request
from app.serve.runner import Job, Runner

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
_BACKGROUND: set[asyncio.Future[None]] = set()


@dataclass
class ServeState:
    """What the routes share: the engine side, the live state, the options, the model's names."""

    runner: Runner
    monitor: Monitor
    options: ServeOptions
    model_id: str
    aliases: frozenset[str] = frozenset()
    on_line: Callable[[str], None] = field(default=lambda _line: None)
    lanes: Lanes = field(init=False)

    def __post_init__(self) -> None:
        self.lanes = Lanes(self.options.parallel, self.options.limits.queue)

    def check_model(self, name: str) -> None:
        if name and name.lower() not in self.aliases and name != self.model_id:
            raise ApiError(
                404,
                f"this server serves {self.model_id}, not {name!r} (GET /v1/models lists it)",
                code="model_not_found",
                param="model",
            )


def error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def build_app(state: ServeState) -> Starlette:
    async def health(request: Request) -> Response:
        if state.runner.reloading or state.runner.session.model is None:
            return JSONResponse({"status": "loading model"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def models(request: Request) -> Response:
        check_key(state.options.api_key, request.headers.get("authorization"))
        model = state.runner.session.model
        meta: dict[str, Any] = {}
        if model is not None:
            meta = {
                "n_ctx": model.max_ctx,
                "n_ctx_train": model.anatomy.n_ctx_train,
                "n_vocab": model.report.n_vocab,
                "architecture": model.anatomy.architecture,
                "slots": state.options.parallel,
            }
        entry = {"id": state.model_id, "object": "model", "created": int(state.monitor.started), "owned_by": "vramchat"}
        return JSONResponse({"object": "list", "data": [{**entry, "meta": meta}]})

    async def metrics(request: Request) -> Response:
        check_key(state.options.api_key, request.headers.get("authorization"))
        text = await run_in_threadpool(render_metrics, state.runner.session, state.monitor, state.model_id)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def chat(request: Request) -> Response:
        return await _answer(state, request, CHAT)

    async def completions(request: Request) -> Response:
        return await _answer(state, request, COMPLETIONS)

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        offered = f"/v1/models, {CHAT}, {COMPLETIONS}, /health, /metrics"
        words = {404: f"no such endpoint: {request.url.path} (this server offers {offered})"}
        message = words.get(exc.status_code, str(exc.detail))
        if exc.status_code == 405:
            message = f"{request.method} is not how {request.url.path} is asked"
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        return error_response(ApiError(exc.status_code, message, kind=kind, code=str(exc.status_code)))

    async def unexpected(request: Request, exc: Exception) -> Response:
        return error_response(ApiError(500, f"the server failed: {type(exc).__name__}", kind="server_error"))

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
        Route(CHAT, chat, methods=["POST"]),
        Route("/chat/completions", chat, methods=["POST"]),
        Route(COMPLETIONS, completions, methods=["POST"]),
        Route("/completions", completions, methods=["POST"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={ApiError: api_error, HTTPException: http_error, Exception: unexpected},
    )


async def _gone(request: Request) -> None:
    """Returns when the client disconnects (its body was read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _next_event(job: Job, gone: asyncio.Task[None]) -> tuple[str, Any] | None:
    """The job's next event, or None when the client went away first."""
    if not job.events.empty():
        return job.events.get_nowait()
    getting = asyncio.ensure_future(job.events.get())
    done, _ = await asyncio.wait({getting, gone}, return_when=asyncio.FIRST_COMPLETED)
    if getting in done:
        return getting.result()
    getting.cancel()
    return None


class _Exchange:
    """One request from its arrival to its end: its id in the monitor, its slot, its log line."""

    def __init__(self, state: ServeState, request: Request, endpoint: str) -> None:
        self.state = state
        self.client = f"{request.client.host}:{request.client.port}" if request.client else ""
        self.endpoint = endpoint
        self.id = state.monitor.begin(endpoint, self.client)
        self.slot: int | None = None

    def piece(self, tokens: int) -> None:
        self.state.monitor.piece(self.id, tokens)

    def end(self, status: int, prompt_tokens: int = 0, tokens: int = 0, stopped_by: str = "") -> None:
        finished = self.state.monitor.end(self.id, status, prompt_tokens, tokens, stopped_by)
        if finished is not None:
            self.state.on_line(request_line(finished, self.client))

    def leave(self) -> None:
        """The slot is free now."""
        slot, self.slot = self.slot, None
        if slot is not None:
            self.state.lanes.leave(slot)

    def leave_after(self, job: Job) -> None:
        """The slot is free once the reply has really ended in the engine (a cancelled one ends within a step)."""
        slot, self.slot = self.slot, None
        if slot is None:
            return
        lanes = self.state.lanes

        async def release() -> None:
            try:
                while (await job.events.get())[0] not in ("done", "error"):
                    pass
            finally:
                lanes.leave(slot)

        task = asyncio.ensure_future(release())
        _BACKGROUND.add(task)  # kept until done: the loop holds tasks only weakly
        task.add_done_callback(_BACKGROUND.discard)


async def _answer(state: ServeState, request: Request, endpoint: str) -> Response:
    runner = state.runner
    exchange = _Exchange(state, request, endpoint)
    streaming = False
    try:
        check_key(state.options.api_key, request.headers.get("authorization"))
        body = await read_json(request, state.options.limits)
        limits = state.options.limits
        wanted = chat_request(body, limits) if endpoint == CHAT else completion_request(body, limits)
        state.check_model(wanted.model)
        exchange.slot = await state.lanes.enter()
        if endpoint == CHAT:
            prepared: Prepared = await run_in_threadpool(runner.prepare_chat, wanted)  # type: ignore[arg-type]
        else:
            prepared = await run_in_threadpool(runner.prepare_completion, wanted)  # type: ignore[arg-type]
        params = runner.params(wanted.sampling, prepared, completion=endpoint != CHAT)
        state.monitor.on_engine(exchange.id, prepared.n_tokens)
        name = wanted.model or state.model_id
        logprobs = wanted.sampling.top_logprobs >= 0
        stream: ChatStream | CompletionStream = (
            ChatStream(name, prepared.opened_reasoning, prepared.tool_family, logprobs)
            if endpoint == CHAT
            else CompletionStream(name, logprobs)
        )
        job = Job(asyncio.get_running_loop())
        threading.Thread(
            target=runner.run, args=(job, prepared, params), name="vramchat-serve-reply", daemon=True
        ).start()
        gone = asyncio.ensure_future(_gone(request))
        try:
            first = await _next_event(job, gone)  # the first piece, or how it failed: the status still to say
            if first is not None and first[0] == "error":
                raise first[1]
            if first is not None and wanted.stream:
                streaming = True
                events = _stream(exchange, job, stream, first, wanted.include_usage)
                return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            event = first
            while event is not None:
                kind, value = event
                if kind == "piece":
                    stream.feed(value[0], value[2])
                    exchange.piece(value[1])
                elif kind == "done":
                    exchange.leave()
                    exchange.end(200, value.prompt_tokens, value.generated_tokens, value.stopped_by)
                    return JSONResponse(stream.whole(value))
                else:
                    raise value
                event = await _next_event(job, gone)
        finally:
            gone.cancel()
        job.cancel()  # the client went away: nobody reads the answer
        exchange.leave_after(job)
        exchange.end(499, prepared.n_tokens, 0, "disconnected")
        return Response(status_code=499)
    except ApiError as exc:
        if exc.code == "queue_full":  # counted, not logged: a flood would bury the log
            state.monitor.refused_busy()
            state.monitor.end(exchange.id, exc.status)
        else:
            exchange.end(exc.status)
        return error_response(exc)
    finally:
        if not streaming:
            exchange.leave()


async def _stream(
    exchange: _Exchange, job: Job, stream: ChatStream | CompletionStream, first: tuple[str, Any], include_usage: bool
) -> AsyncIterator[bytes]:
    """Server-sent events, as OpenAI streams them; the client leaving (Starlette cancels this generator)
    stops the reply at once and frees its slot."""
    finished = False
    tokens = 0
    try:
        if isinstance(stream, ChatStream):
            yield sse(stream.first())
        event = first
        while True:
            kind, value = event
            if kind == "piece":
                tokens = value[1]
                exchange.piece(tokens)
                for chunk in stream.feed(value[0], value[2]):
                    yield sse(chunk)
            elif kind == "done":
                finished = True
                exchange.leave()
                exchange.end(200, value.prompt_tokens, value.generated_tokens, value.stopped_by)
                for chunk in stream.last(value):
                    yield sse(chunk)
                if include_usage:
                    yield sse(stream.usage_chunk(value))
                yield sse("[DONE]")
                return
            else:
                finished = True
                exchange.leave()
                error: ApiError = value
                exchange.end(error.status)
                yield sse(error.body())
                return
            event = await job.events.get()
    finally:
        if not finished:
            job.cancel()
            exchange.leave_after(job)
            exchange.end(499, 0, tokens, "disconnected")
