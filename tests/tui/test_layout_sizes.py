"""Every screen at 80x24, 100x30, 160x48 and 200x50: nothing squeezed to nothing, nothing cut short.

A text cut mid-word is caught too: an input's hint wider than the input, a long model name in the chat's
header.

A first user met a crash at 80 columns (the chat column wrapped to width 0), a picker whose fit
column (its point) was the first to go and a Size without its unit, a footer cut mid-word. These
tests drive each screen at the sizes terminals come in and read the screen as a person would
(tests.support.tui_helpers.layout_problems): an ellipsis where text should be, a label or a button
narrower than its words, a table cell cut, a widget with no room, a footer key not shown whole.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

import pytest
from textual.geometry import Region

from app.settings import Settings
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dialogs import ConfirmDialog
from app.tui.screens.hub import HubScreen
from app.tui.screens.picker import PickerScreen
from tests.remote.conftest import REPO
from tests.support.fake_engine import FakeEngine
from tests.support.hub_server import LocalHub
from tests.support.tiny import ZOO, write_tiny_model
from tests.support.tui_helpers import (
    footer_keys_cut,
    layout_problems,
    make_app,
    model_loaded,
    picker_ready,
    reply_done,
    screen_text,
    wait_for,
)

SIZES = [(80, 24), (100, 30), (160, 48), (200, 50)]
REPLY = "The capital of France is **Paris**. It has been the capital since the tenth century, on the Seine."


@pytest.fixture
def shelf(shelf: Path, zoo: dict[str, Path]) -> Path:
    """The shared shelf, with a second model whose long file name the layouts must fit."""
    shutil.copy(zoo["qwen3-hd"], shelf / "a-model-with-quite-a-long-file-name-q4_k_m.gguf")
    return shelf


def _whole(app) -> None:
    assert layout_problems(app) == [], "\n".join(screen_text(app))
    assert footer_keys_cut(app) == [], "\n".join(screen_text(app))


async def _chat(app, pilot) -> ChatScreen:
    await wait_for(pilot, picker_ready(app))
    await pilot.press("ctrl+l")
    await wait_for(pilot, model_loaded(app))
    box = app.screen.query_one("#input")
    box.focus()
    box.load_text("What is the capital of France?")
    await pilot.press("enter")
    await pilot.pause(0.05)
    await wait_for(pilot, reply_done(app))
    await pilot.pause(0.1)
    assert isinstance(app.screen, ChatScreen)
    # the memory panel mounts its maps and plots as the first samples come (every 0.5 s): a frame
    # in the middle of that is not what a person reads; what settles is, and it must read whole
    with contextlib.suppress(AssertionError):
        await wait_for(pilot, lambda: not layout_problems(app), timeout=3)
    return app.screen


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_picker_reads_whole(shelf: Path, size: tuple[int, int]) -> None:
    app = make_app(shelf)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.pause(0.1)
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        _whole(app)
        lines = screen_text(app)
        # the point of the picker: each model's name, its size with its unit and its fit, on its row, at every size
        assert any("Model" in line and "Size" in line and "Fit on this machine" in line for line in lines)
        for name in ("tiny-llama", "tiny-qwen3"):
            (row,) = [line for line in lines if line.startswith(f"│ {name} ")]  # its row of the table
            assert re.search(r" \d+(\.\d+)? (KiB|MiB|GiB) ", row) and "full GPU · 8,192 tok" in row, row
        load = screen.query_one("#load")
        assert load.region.bottom <= size[1] - 1, "the Load button is on screen"
        # the selected model's path, longer than the plan panel is wide at 80x24, is folded, not cut at the edge
        plan = screen.query_one("#plan-text")
        folded = "".join(s.text.strip() for s in plan.render_lines(Region(0, 0, plan.size.width, plan.size.height)))
        assert any(str(path) in folded for path in shelf.glob("*.gguf")), folded


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_chat_reads_whole(shelf: Path, size: tuple[int, int]) -> None:
    app = make_app(shelf, FakeEngine(reply=REPLY), settings=Settings(scan_known_caches=False))
    async with app.run_test(size=size) as pilot:
        chat = await _chat(app, pilot)
        conversation = chat.query_one("#conversation")
        assert conversation.region.width >= 40, "the conversation keeps at least 40 columns"
        _whole(app)
        text = "\n".join(screen_text(app))
        assert "Paris" in text and "context " in text
        pane = chat.query_one("#chat-list-pane")
        if size[0] >= 150:  # beside the conversation from 150 columns
            assert pane.region.width > 0
        else:  # below, hidden until Ctrl+B opens it as a drawer over the conversation
            assert pane.region.width == 0
            await pilot.press("ctrl+b")
            await pilot.pause(0.1)
            assert pane.region.width > 0 and conversation.region.width >= 40
            assert "What is the capital of France?" in "\n".join(screen_text(app))  # the chat is listed
            _whole(app)
            await pilot.press("escape")  # Esc closes the drawer
            await pilot.pause(0.1)
            assert pane.region.width == 0


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_dashboard_help_and_dialogs_read_whole(shelf: Path, size: tuple[int, int]) -> None:
    app = make_app(shelf, FakeEngine(reply=REPLY), settings=Settings(scan_known_caches=False))
    async with app.run_test(size=size) as pilot:
        await _chat(app, pilot)
        for key, close in (("f3", "escape"), ("f1", "escape"), ("f4", "escape"), ("f6", "escape")):
            await pilot.press(key)
            await pilot.pause(0.2)
            _whole(app)
            await pilot.press(close)
            await pilot.pause(0.1)
        await pilot.press("f2")  # the picker's RPC servers dialog
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        await pilot.press("f6")
        await pilot.pause(0.2)
        _whole(app)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_hub_view_reads_whole(shelf: Path, hub: LocalHub, size: tuple[int, int]) -> None:
    """The hub view's repos, an opened repo's quants, the download dialog, a download running and one
    cancelled (its Resume and Delete buttons), at every size; on a short terminal one list at a time."""
    from textual.widgets import DataTable

    app = make_app(shelf, settings=Settings(scan_known_caches=False))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, HubScreen))
        screen = app.screen
        assert isinstance(screen, HubScreen)
        await wait_for(pilot, lambda: bool(screen.repos) and len(screen.fits) == len(screen.repos))
        await pilot.pause(0.1)
        _whole(app)
        assert "full GPU · 32,768 tok" in "\n".join(screen_text(app))
        await pilot.press("enter")  # open the repo
        await wait_for(pilot, lambda: screen.planned == REPO, timeout=30)
        await pilot.pause(0.2)
        _whole(app)
        text = "\n".join(screen_text(app))
        assert "Best here" in text and "Q4_K_M" in text and "full GPU · 32,768 tok" in text
        repos = screen.query_one("#hub-repos", DataTable)
        assert (repos.region.height == 0) == (size[1] < 32), "a short terminal shows one list at a time"
        quants = screen.query_one("#hub-quants", DataTable)
        quants.move_cursor(row=next(i for i, m in enumerate(screen.models) if m.quant == "Q4_K_M"))
        hub.rate = 20 << 20
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.pause(0.1)
        _whole(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.download.last_done > 0)
        await pilot.pause(0.2)
        _whole(app)
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: screen.download.stopped is not None)
        await pilot.pause(0.2)
        _whole(app)
        assert "Resume" in "\n".join(screen_text(app))


async def test_a_running_chat_resized_through_every_size_keeps_working(shelf: Path) -> None:
    """160 -> 80 -> 100 -> 200 -> 80 columns with a chat going: no crash, each size reads whole, and a
    reply sent at the smallest size arrives."""
    app = make_app(shelf, FakeEngine(reply=REPLY), settings=Settings(scan_known_caches=False))
    async with app.run_test(size=(160, 48)) as pilot:
        await _chat(app, pilot)
        for size in [(80, 24), (100, 30), (200, 50), (80, 24)]:
            await pilot.resize_terminal(*size)
            await pilot.pause(0.2)
            _whole(app)
        box = app.screen.query_one("#input")
        box.focus()
        box.load_text("And of Italy?")
        await pilot.press("enter")
        await pilot.pause(0.05)
        await wait_for(pilot, reply_done(app))
        assert sum("Paris" in line for line in screen_text(app)) >= 1


LONG_NAME = "Qwen3 Coder 30B A3B Instruct 2507 Unsloth"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_a_long_model_name_in_the_title_is_never_cut_mid_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """The chat's header with a long model name: the figures after it give way (they are on the status
    line), the name stays whole, nothing hides under the header's clock space."""
    from dataclasses import replace

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    root = tmp_path / "shelf"
    root.mkdir()
    write_tiny_model(root / "long.gguf", replace(ZOO["llama-f16"], name=LONG_NAME))
    app = make_app(root, FakeEngine(reply=REPLY), settings=Settings(scan_known_caches=False))
    async with app.run_test(size=size) as pilot:
        await _chat(app, pilot)
        _whole(app)
        header = screen_text(app)[0]
        assert f"vramchat — {LONG_NAME}" in header
        assert ("tokens" in header) == (size[0] >= 120), header  # the count where there is room for it


SYSTEM_PROMPT = "You are a terse geography tutor who answers in a word where it can, never in more than a sentence."


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_a_chats_own_settings_the_marked_messages_keys_and_an_edit_read_whole(
    shelf: Path, size: tuple[int, int]
) -> None:
    """The line over the chat with a long system prompt and a preset's sampling (it once ended in a dangling
    "·", and "Sampling: … min-p" without its values), the footer while a message is marked (once "^g G▏^p
    palettei" at 80 columns), and the message box's title while an edit is pending, at every size."""
    app = make_app(shelf, FakeEngine(reply=REPLY), settings=Settings(scan_known_caches=False))
    async with app.run_test(size=size) as pilot:
        chat = await _chat(app, pilot)
        chat.controller.set_setting("system", SYSTEM_PROMPT)
        for name, value in (("temp", "1"), ("top-p", "0.98"), ("top-k", "100"), ("min-p", "0.02"), ("repeat", "1.05")):
            chat.controller.set_setting(name, value)
        await pilot.pause(0.2)
        _whole(app)
        line = "\n".join(screen_text(app))
        assert "System prompt: “You are a terse" in line and "Sampling: temp 1" in line
        await pilot.press("ctrl+up")  # a message marked: its keys in the footer
        await pilot.pause(0.2)
        _whole(app)
        bottom = screen_text(app)[-1]
        assert all(words in bottom for words in ("Copy", "Edit", "Back to typing", "Quit", "Help")), bottom
        await pilot.press("e")  # its edit in the message box, the box's title says so
        await pilot.pause(0.2)
        assert chat.controller.editing is not None
        _whole(app)
