"""A screen shown with the breakpoint classes of the terminal's size already set (app/tui/breakpoints.py):
the classes are the ones Textual itself would give it, and its first Resize restyles nothing."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.screen import Screen
from textual.widgets import Static

from app.tui.app import VramchatApp
from app.tui.breakpoints import fitted

SIZES = [(60, 20), (99, 31), (100, 32), (149, 40), (150, 50), (220, 60)]


class Shown(App[None]):
    HORIZONTAL_BREAKPOINTS = VramchatApp.HORIZONTAL_BREAKPOINTS
    VERTICAL_BREAKPOINTS = VramchatApp.VERTICAL_BREAKPOINTS

    def __init__(self, fit: bool) -> None:
        super().__init__()
        self.fit = fit
        self.restyles: list[int] = []
        self.classes_at_first_frame: set[str] | None = None

    def on_mount(self) -> None:
        screen: Screen[None] = Screen()
        restyle = screen.update_node_styles

        def counted(animate: bool = True) -> None:
            self.restyles.append(1)
            restyle(animate=animate)

        # counts this screen's full restyles
        screen.update_node_styles = counted  # type: ignore[method-assign]
        self.push_screen(fitted(self, screen) if self.fit else screen)


@pytest.mark.parametrize("size", SIZES)
async def test_the_classes_set_before_the_first_frame_are_textuals_own(size: tuple[int, int]) -> None:
    chosen: dict[bool, set[str]] = {}
    for fit in (False, True):
        app = Shown(fit)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            chosen[fit] = {c for c in app.screen.classes if c.startswith("-")}
    width, height = size
    assert chosen[True] == chosen[False]
    assert ("-wide" if width >= 150 else "-medium" if width >= 100 else "-narrow") in chosen[True]
    assert ("-tall" if height >= 32 else "-short") in chosen[True]


async def test_a_fitted_screen_is_not_restyled_again_by_its_first_resize() -> None:
    counts: dict[bool, int] = {}
    for fit in (False, True):
        app = Shown(fit)
        async with app.run_test(size=(160, 45)) as pilot:
            app.screen.mount(Static("shown"))
            await pilot.pause()
            counts[fit] = len(app.restyles)
    assert counts[True] == counts[False] - 1, counts  # the resume's restyle stays, the resize's is gone
