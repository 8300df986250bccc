"""The message box as people use it: Up and Down through earlier messages, the new-line key its hint
names, slash commands with completion, and copying a message or a code block from the keyboard."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.tui.screens.chat import ChatScreen
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_view import MessageView
from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, reply_done, screen_text, wait_for

SIZE = (120, 40)


@pytest.fixture
def shelf(tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    root = tmp_path / "shelf"
    root.mkdir()
    shutil.copy(zoo["llama-f16"], root / "llama-f16.gguf")
    return root


async def open_chat(app, pilot) -> ChatScreen:
    await wait_for(pilot, picker_ready(app))
    await pilot.press("ctrl+l")
    await wait_for(pilot, model_loaded(app))
    screen = app.screen
    assert isinstance(screen, ChatScreen)
    return screen


async def send(app, pilot, text: str) -> None:
    box = app.screen.query_one(ChatInput)
    box.focus()
    box.load_text(text)
    await pilot.press("enter")
    await pilot.pause(0.05)
    await wait_for(pilot, reply_done(app))
    await pilot.pause(0.05)


async def test_up_and_down_go_through_earlier_messages_and_keep_the_draft(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        await send(app, pilot, "an earlier chat's question")
        await pilot.press("ctrl+n")
        await pilot.pause()
        await send(app, pilot, "first line\nsecond line")
        await send(app, pilot, "the last question")
        box = chat.query_one(ChatInput)
        box.focus()
        await pilot.press(*"my draft")
        await pilot.press("up")
        assert box.text == "the last question"
        await pilot.press("up")  # a message of two lines: the cursor at its top, so Up goes on
        assert box.text == "first line\nsecond line"
        await pilot.press("up")  # then the earlier chat's
        assert box.text == "an earlier chat's question"
        await pilot.press("up")  # nothing earlier: it stays
        assert box.text == "an earlier chat's question"
        await pilot.press("down", "down")
        assert box.text == "the last question"
        await pilot.press("down")  # after the newest, the draft as it was typed
        assert box.text == "my draft"
        # Up inside a message of several lines moves the cursor, not through the history
        box.load_text("one\ntwo")
        box.move_cursor((1, 1))
        await pilot.press("up")
        assert box.text == "one\ntwo" and box.cursor_location == (0, 1)
        # a recalled message edited is a new draft: Down no longer replaces it
        box.load_text("")
        await pilot.press("up", "end", *"!", "down")
        assert box.text == "the last question!"


async def test_the_hint_names_the_new_line_key_that_works_in_tmux(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        chat = await open_chat(app, pilot)
        box = chat.query_one(ChatInput)
        assert "Ctrl+J new line" in box.placeholder and "Shift+Enter" not in box.placeholder
        assert any("Ctrl+J new line" in row for row in screen_text(app))
        box.focus()
        await pilot.press(*"a", "ctrl+j", *"b")
        assert box.text == "a\nb"
        assert not list(chat.query(MessageView))  # nothing sent
