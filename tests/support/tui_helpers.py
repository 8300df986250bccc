"""Helpers for pilot tests: an app on fixed devices and folders, and waiting for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from app.settings import Settings
from app.tui.app import AppOptions, VramchatApp
from app.tui.screens.chat import ChatScreen
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
    fake = None if real_engine else engine or FakeEngine()
    if fake is not None:
        options.engine_factory = lambda: fake
    app = VramchatApp(options, settings or Settings(scan_known_caches=False))
    if fake is not None:  # the fake's buffers are planned for the devices the app planned for
        fake.devices = lambda: app.services.devices or app.services.probe_devices()
    return app


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
        return (
            isinstance(screen, PickerScreen)
            and not screen._scanning
            and screen.plan_state in ("ready", "error")
            and screen.panel.knobs_mounted
        )

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


async def open_chat(app: VramchatApp, pilot) -> ChatScreen:
    """From the picker to the chat with the selected model loaded (Ctrl+L)."""
    await wait_for(pilot, picker_ready(app))
    await pilot.press("ctrl+l")
    await wait_for(pilot, model_loaded(app))
    screen = app.screen
    assert isinstance(screen, ChatScreen)
    return screen


async def send(app: VramchatApp, pilot, text: str) -> None:
    """Put `text` in the message box and press Enter (what follows is the test's to wait for)."""
    from app.tui.widgets.chat_input import ChatInput

    box = app.screen.query_one(ChatInput)
    box.focus()
    box.load_text(text)
    await pilot.press("enter")
    await pilot.pause(0.05)


async def send_and_wait(app: VramchatApp, pilot, text: str, timeout: float = 20.0) -> None:
    """Type `text` into the message box, send it, and wait for the whole reply."""
    await send(app, pilot, text)
    await wait_for(pilot, reply_done(app), timeout=timeout)
    await pilot.pause(0.05)


def screen_text(app: VramchatApp) -> list[str]:
    """The screen as a person reads it: one string per row (what a screenshot shows, as text)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text().splitlines()


# words that end in an ellipsis by design (placeholders and "in progress" words), not text cut short
_ELLIPSIS_WORDS = ("Ask something…", "Search chats…", "Looking for models…", "Planning…", "Probing devices…")


def layout_problems(app: VramchatApp) -> list[str]:
    """What a person would see as broken at this size: a widget squeezed to nothing, a label or a
    cell cut short (an ellipsis where text should be), a button or a key of the footer that does not
    show whole. Empty when the screen reads whole."""
    from rich.text import Text
    from textual.widgets import Button, DataTable, Input, Static, TextArea

    problems: list[str] = []
    screen = app.screen
    lines = screen_text(app)
    for row, line in enumerate(lines):
        cleaned = line.replace("…”", "”")  # a quotation shortened on purpose (a long system prompt), in its quotes
        for word in _ELLIPSIS_WORDS:
            cleaned = cleaned.replace(word, "")
        if "…" in cleaned:
            problems.append(f"row {row} is cut short: {line.strip()!r}")
    for widget in screen.query("*"):
        if not _shown(widget):
            continue
        region = widget.region
        if region.width <= 0 or region.height <= 0:
            if not _scrolled_out_of_view(widget) and not _empty_by_design(widget):
                problems.append(f"{widget!r} has no room ({region.width}x{region.height})")
            continue
        if isinstance(widget, (Static, Button)):
            # one row of text: it must fit that row (more rows wrap, which cuts nothing)
            plain = _plain(widget)
            need = max((Text(s).cell_len for s in plain.splitlines()), default=0)
            room = widget.content_region.width
            if need > room and widget.content_region.height <= 1 and "\n" not in plain.strip():
                problems.append(f"{widget!r} needs {need} columns for {plain!r}, has {room}")
        if isinstance(widget, Input) and not widget.value and widget.placeholder:
            hint = str(widget.placeholder)
            if Text(hint).cell_len > widget.content_size.width:
                problems.append(f"{widget!r}'s hint {hint!r} is cut to {widget.content_size.width} columns")
        if isinstance(widget, TextArea) and not widget.text and widget.placeholder:
            hint = str(widget.placeholder)
            if Text(hint).cell_len > widget.content_size.width:
                problems.append(f"{widget!r}'s hint {hint!r} is cut to {widget.content_size.width} columns")
        if isinstance(widget, DataTable):
            for key, column in widget.columns.items():
                room = max(column.content_width, column.width) if column.auto_width else column.width
                for row_key in widget.rows:
                    cell = widget.get_cell(row_key, key)
                    text = Text.from_markup(cell) if isinstance(cell, str) else cell if isinstance(cell, Text) else None
                    text = text if text is not None else Text(str(cell))
                    # a cell of several lines (a row made taller for it) needs its widest line's width
                    width = max((Text(line).cell_len for line in text.plain.splitlines()), default=0)
                    if width > room:
                        problems.append(f"{widget.id}: {column.label.plain} cell {str(cell)!r} cut to {room}")
    return problems


def _plain(widget) -> str:
    """The text a Static or a Button shows, as plain text."""
    from rich.text import Text
    from textual.content import Content
    from textual.widgets import Button

    visual = widget.label if isinstance(widget, Button) else widget.visual
    if isinstance(visual, (Text, Content)):
        return visual.plain
    return str(visual) if isinstance(visual, str) else ""


def _scrolled_out_of_view(widget) -> bool:
    """Laid out whole inside a container that scrolls to it (a plot below the memory panel's fold):
    there is room for it, a scroll away, unlike a widget squeezed to nothing or cut off."""
    size = widget.outer_size
    if size.width <= 0 or size.height <= 0:
        return False
    node = widget.parent
    while node is not None and node is not widget.screen:
        if getattr(node, "is_scrollable", False) and (node.max_scroll_y > 0 or node.max_scroll_x > 0):
            return True
        node = node.parent
    return False


def _empty_by_design(widget) -> bool:
    """textual-plot's margin row above a plot, 0 rows high where the plot draws nothing there (the
    dashboard's plots set margin_top to 0): no room is what was asked for."""
    from textual_plot import PlotWidget

    return widget.id == "margin-top" and any(isinstance(a, PlotWidget) and a.margin_top == 0 for a in widget.ancestors)


def _shown(widget) -> bool:
    """Displayed, with every ancestor displayed, on the current screen."""
    node = widget
    while node is not None and node is not widget.screen:
        if not node.display or not getattr(node, "visible", True):
            return False
        node = node.parent
    return True


def footer_keys_cut(app: VramchatApp) -> list[str]:
    """The footer's keys whose description is not shown whole on the last row (a screen without a
    footer of its own, a dialog over another screen, has none to check). A key the footer leaves out
    where there is no room for it (app.tui.widgets.footer) is not cut; the focused widget's keys and
    the app's Quit and Help must show."""
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    footers = app.screen.query(Footer)
    if not footers:
        return []
    bottom = screen_text(app)[-1]
    shown = [k.description for k in footers.first().query(FooterKey) if k.description]
    needed = [
        b.binding.description
        for b in app.screen.active_bindings.values()
        if b.binding.show and b.binding.description and (b.node is app.screen.focused or b.binding.action in _ALWAYS)
    ]
    return [words for words in dict.fromkeys([*shown, *needed]) if words not in bottom]


_ALWAYS = ("quit", "help")  # the app's actions the footer never leaves out
