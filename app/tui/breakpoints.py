"""A screen born with the breakpoint classes of the terminal it is shown in.

Textual sets a screen's breakpoint classes ("-wide", "-tall", …) on its first Resize, and a change of
class restyles every widget of the screen: for the picker, a third pass over its widgets before the
first frame (after the one at mount and the one on resume). A screen whose classes already match the
terminal's size leaves that Resize nothing to change.
"""

from __future__ import annotations

from typing import TypeVar

from textual.app import App
from textual.geometry import Size
from textual.screen import Screen

ScreenT = TypeVar("ScreenT", bound=Screen)


def breakpoint_classes(app: App, screen: Screen, size: Size) -> dict[str, bool]:
    """Each breakpoint class of `screen` (its own breakpoints, else the app's), and whether `size` has it:
    for each axis the class of the highest breakpoint the size reaches, as Textual chooses it."""
    classes: dict[str, bool] = {}
    for dimension, own, apps in (
        (size.width, screen.HORIZONTAL_BREAKPOINTS, app.HORIZONTAL_BREAKPOINTS),
        (size.height, screen.VERTICAL_BREAKPOINTS, app.VERTICAL_BREAKPOINTS),
    ):
        breakpoints = (apps if own is None else own) or []
        reached = [(at, name) for at, name in breakpoints if dimension >= at]
        chosen = max(reached)[1] if reached else None
        for _, name in breakpoints:
            classes[name] = classes.get(name, False) or name == chosen
    return classes


def fitted(app: App, screen: ScreenT) -> ScreenT:
    """`screen`, given the breakpoint classes of the app's present size before it is first shown."""
    screen.update_classes(breakpoint_classes(app, screen, app.size), update=False)
    return screen
