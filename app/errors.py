"""One base for the errors vramchat shows a user: each says what happened in words, under a title.

Anything that is a `VramchatError` is shown as its title and message (a dialog, a notification or
one line on stderr); anything else that reaches the top is a bug, shown as such.
"""

from __future__ import annotations


class VramchatError(Exception):
    """An error with a message meant for the user."""

    title = "Something went wrong"


class UsageError(VramchatError):
    """The command line asks for something that cannot be done as asked (exit status 2)."""

    title = "Usage"


def describe(error: BaseException | None) -> tuple[str, str]:
    """(title, text) for showing `error` to a user."""
    if error is None:
        return "Something went wrong", "a background task failed"
    if isinstance(error, VramchatError):
        return error.title, str(error) or type(error).__name__
    from planner.errors import ConfigError, GGUFError, ModelError, PlannerError  # not on the replay's path

    if isinstance(error, PlannerError):
        # the planner's errors carry a message meant for the user but no title of their own
        titles: tuple[tuple[type[PlannerError], str], ...] = (
            (GGUFError, "The model file cannot be read"),
            (ModelError, "llama.cpp would refuse this model"),
            (ConfigError, "llama.cpp would refuse this configuration"),
            (PlannerError, "The model cannot be planned"),
        )
        title = next(t for kind, t in titles if isinstance(error, kind))
        return title, str(error) or type(error).__name__
    return "Something went wrong (please report this)", f"{type(error).__name__}: {error}"
