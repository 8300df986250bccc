"""A request's body, read within its limits: its size (a Content-Length over it is refused before a byte
is read; a body without one is counted as it comes) and its time (a client that sends a byte a second is
answered 408, its connection freed), then parsed as a JSON object."""

from __future__ import annotations

import json
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request

from app.serve.errors import ApiError, bad_request
from app.serve.options import Limits


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"the request body is larger than this server takes ({limit // (1024 * 1024)} MiB): "
        "send fewer or smaller images",
        code="body_too_large",
    )


async def read_json(request: Request, limits: Limits) -> dict[str, Any]:
    """The body as a JSON object; ApiError (400, 408, 413) says what was wrong with it."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limits.body_bytes:
                raise _too_large(limits.body_bytes)
        except ValueError:
            raise bad_request("the Content-Length header is not a number") from None
    chunks: list[bytes] = []
    total = 0
    try:
        with anyio.fail_after(limits.body_seconds):
            async for chunk in request.stream():
                total += len(chunk)
                if total > limits.body_bytes:
                    raise _too_large(limits.body_bytes)
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(
            408, f"the request body took longer than {limits.body_seconds:g} s to arrive", code="request_timeout"
        ) from None
    except ClientDisconnect:
        raise ApiError(400, "the client went away before its request arrived", code="client_gone") from None
    raw = b"".join(chunks)
    if not raw.strip():
        raise bad_request("the request has no body: send a JSON object", code="invalid_json")
    try:
        data = json.loads(raw)
    except UnicodeDecodeError:
        raise bad_request("the body is not UTF-8 text", code="invalid_json") from None
    except json.JSONDecodeError as exc:
        raise bad_request(
            f"the body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", code="invalid_json"
        ) from None
    except RecursionError:
        raise bad_request("the body's JSON is nested too deeply", code="invalid_json") from None
    if not isinstance(data, dict):
        raise bad_request(f"the body must be a JSON object, not {type(data).__name__}", code="invalid_json")
    return data
