"""Helpers for pilot tests: an app on fixed devices and folders, and waiting for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from app.settings import Settings
from app.tui.app import AppOptions, VramchatApp
from tests.support.fake_engine import FakeEngine


def make_app(
    models_dir: Path | None = None,
    engine: FakeEngine | None = None,
    model: str | None = None,
    settings: Settings | None = None,
    include_demo: bool = False,
    real_engine: bool = False,
) -> VramchatApp:
    options = AppOptions(model=model, models_dirs=[str(models_dir)] if models_dir else [], include_demo=include_demo)
    if not real_engine:
        fake = engine or FakeEngine()
        options.engine_factory = lambda: fake
    return VramchatApp(options, settings or Settings(scan_known_caches=False))


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 20.0, step: float = 0.05) -> None:
    """Let the app run until `condition()` holds (fail after `timeout` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {condition}")
        await pilot.pause(step)


def picker_ready(app: VramchatApp) -> Callable[[], bool]:
    from app.tui.screens.picker import PickerScreen

    def ready() -> bool:
        screen = app.screen
        return isinstance(screen, PickerScreen) and not screen._scanning and screen.plan_state in ("ready", "error")

    return ready


def model_loaded(app: VramchatApp) -> Callable[[], bool]:
    from app.tui.screens.chat import ChatScreen

    def ready() -> bool:
        screen = app.screen
        return isinstance(screen, ChatScreen) and not screen.loading and app.session.model is not None

    return ready


def reply_done(app: VramchatApp) -> Callable[[], bool]:
    def done() -> bool:
        screen = app.chat_screen()
        return not screen.generating  # type: ignore[attr-defined]

    return done
