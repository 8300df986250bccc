"""Errors as OpenAI's API answers them: a status, and `{"error": {"message", "type", "code", "param"}}`.

The `openai` client raises by status (400 BadRequestError, 401 AuthenticationError, 404 NotFoundError,
429 RateLimitError, 5xx InternalServerError) and shows the message, so every refusal says in words what
was wrong and what to do.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request answered with an error body (never a traceback)."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "code": self.code, "param": self.param}}


def bad_request(message: str, param: str | None = None, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, code=code, param=param)


def server_error(message: str, code: str = "engine_error") -> ApiError:
    return ApiError(500, message, kind="server_error", code=code)


def unavailable(message: str, code: str, retry_after: int = 1) -> ApiError:
    return ApiError(503, message, kind="server_error", code=code, headers={"Retry-After": str(retry_after)})
