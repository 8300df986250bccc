"""The API key: every request carries `Authorization: Bearer KEY` when the server has one, compared in
constant time (hmac.compare_digest), so that the time an answer takes says nothing of the key."""

from __future__ import annotations

import hmac

from app.serve.errors import ApiError


def check_key(expected: str | None, header: str | None) -> None:
    """Nothing when the server has no key or the header carries it; ApiError 401 otherwise."""
    if not expected:
        return
    given = ""
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer":
            given = token.strip()
    if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")):
        raise ApiError(
            401,
            "this server needs an API key: send the header 'Authorization: Bearer KEY' "
            "(the openai client: api_key=KEY, or OPENAI_API_KEY)",
            kind="authentication_error",
            code="invalid_api_key",
        )
