"""The first theme is given before the stylesheet is first read (VramchatApp._start_in_theme): the app starts in
the theme the settings name, with its classes and colours, and reads its stylesheet once (setting `theme` as a
later change does had it read again as the app ran: 10-13 ms of every start)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.color import Color
from textual.css.stylesheet import Stylesheet

from app.settings import Settings
from tests.support.tui_helpers import make_app, picker_ready, wait_for


@pytest.mark.parametrize("theme", ["vramchat-dark", "nord", "vramchat-light"])
async def test_the_app_starts_in_its_theme_and_reads_the_stylesheet_once(
    tmp_path: Path, zoo: dict[str, Path], theme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    shutil.copy(zoo[next(iter(zoo))], tmp_path / "one.gguf")
    reread: list[int] = []
    reparse = Stylesheet.reparse

    def counted(stylesheet: Stylesheet) -> None:
        reread.append(1)
        reparse(stylesheet)

    monkeypatch.setattr(Stylesheet, "reparse", counted)
    app = make_app(tmp_path, settings=Settings(scan_known_caches=False, theme=theme))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, picker_ready(app), timeout=60)
        assert app.theme == theme and f"-theme-{theme}" in app.classes
        dark = app.current_theme.dark
        assert ("-dark-mode" in app.classes) == dark and ("-light-mode" in app.classes) == (not dark)
        assert app.screen.styles.background == Color.parse(app.get_css_variables()["background"])
        # a light theme maps the terminal's ANSI colours anew: Textual's own way, which reads the stylesheet again
        assert len(reread) == (0 if dark else 1), reread
        app.theme = "textual-light" if dark else "textual-dark"
        await pilot.pause()
        assert app.screen.styles.background == Color.parse(app.get_css_variables()["background"])


async def test_a_theme_vramchat_does_not_have_is_said_and_the_dark_one_used(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A theme name edited into the settings by hand that no theme has: the app starts in vramchat-dark and says
    why (the file is left as the user wrote it until a theme is chosen)."""
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    shutil.copy(zoo[next(iter(zoo))], tmp_path / "one.gguf")
    app = make_app(tmp_path, settings=Settings(scan_known_caches=False, theme="neon-pink"))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, picker_ready(app), timeout=60)
        assert app.theme == "vramchat-dark"
        said = [n.message for n in app._notifications]
        assert any("theme 'neon-pink', which vramchat does not have: vramchat-dark is used" in m for m in said), said
