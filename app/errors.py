"""One base for the errors vramchat shows a user: each says what happened in words, under a title.

Anything that is a `VramchatError` is shown as its title and message (a dialog, a notification or
one line on stderr); anything else that reaches the top is a bug, shown as such.
"""

from __future__ import annotations


class VramchatError(Exception):
    """An error with a message meant for the user."""

    title = "Something went wrong"


def describe(error: BaseException | None) -> tuple[str, str]:
    """(title, text) for showing `error` to a user."""
    if error is None:
        return "Something went wrong", "a background task failed"
    if isinstance(error, VramchatError):
        return error.title, str(error) or type(error).__name__
    return "Something went wrong (please report this)", f"{type(error).__name__}: {error}"
