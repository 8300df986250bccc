"""One base for the errors vramchat shows a user: each says what happened in words, under a title.

Anything that is a `VramchatError` is shown as its title and message (a dialog, a notification or
one line on stderr); anything else that reaches the top is a bug, shown as such.
"""

from __future__ import annotations

from planner.errors import ConfigError, GGUFError, ModelError, PlannerError

# titles for the planner's errors, which carry a message meant for the user but no title of their own
_PLANNER_TITLES: tuple[tuple[type[PlannerError], str], ...] = (
    (GGUFError, "The model file cannot be read"),
    (ModelError, "llama.cpp would refuse this model"),
    (ConfigError, "llama.cpp would refuse this configuration"),
    (PlannerError, "The model cannot be planned"),
)


class VramchatError(Exception):
    """An error with a message meant for the user."""

    title = "Something went wrong"


def describe(error: BaseException | None) -> tuple[str, str]:
    """(title, text) for showing `error` to a user."""
    if error is None:
        return "Something went wrong", "a background task failed"
    if isinstance(error, VramchatError):
        return error.title, str(error) or type(error).__name__
    if isinstance(error, PlannerError):
        title = next(t for kind, t in _PLANNER_TITLES if isinstance(error, kind))
        return title, str(error) or type(error).__name__
    return "Something went wrong (please report this)", f"{type(error).__name__}: {error}"
