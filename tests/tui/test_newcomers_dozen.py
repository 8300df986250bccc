"""What an hour as a new user found (issue 49), each as a user meets it: hostile names, a chat that drew
nothing after a crash and a reload, a reply that rendered as nothing, and the smaller defects."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable

from app.settings import Settings
from app.tui.messages import ReplyPiece
from app.tui.screens.chat import ChatScreen
from app.tui.screens.hub import HubScreen
from app.tui.widgets.message_view import MessageView
from tests.support.fake_engine import FakeEngine
from tests.support.hub_server import LocalHub
from tests.support.pty_app import PtyApp, until
from tests.support.tiny import ENDLESS, TinySpec, write_tiny_model
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, reply_done, screen_text, send, wait_for

SIZE = (120, 40)
CLIPBOARD = "[/]evil\x1b]52;c;aGk=\x07"  # an OSC 52 clipboard write of "hi"


async def loaded_chat(app, pilot) -> ChatScreen:
    await wait_for(pilot, picker_ready(app))
    await pilot.press("ctrl+l")
    await wait_for(pilot, model_loaded(app))
    assert isinstance(app.screen, ChatScreen)
    return app.screen


def _on_screen(app, text: str) -> bool:
    return any(text in row for row in screen_text(app))


# -- 1. nothing a model file says reaches the terminal raw ------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_the_picker_writes_no_escape_sequence_of_a_models_making(tmp_path: Path, _private_home: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_model(folder / "model.gguf", TinySpec(name=CLIPBOARD))
    write_tiny_model(folder / "red\x1b[31mname.gguf", TinySpec(name="plain"))
    app = PtyApp("--models-dir", str(folder))
    try:
        until(lambda: app.shown("evil\\x1b]52;c;aGk=\\x07"), 60, "the hostile name, drawn visibly")
        until(lambda: app.shown("CPU only"), 60, "the list planned")
        app.type("\x1b[B")  # Down: the other row, planned and its path drawn
        until(lambda: app.shown("red\\x1b[31mname.gguf"), 30, "the hostile file name, drawn visibly")
        app.type("\x11")  # Ctrl+Q
        until(lambda: app.proc.poll() is not None, 30, "the app to quit")
    finally:
        if app.proc.poll() is None:
            app.kill()
    written = bytes(app.screen)
    assert b"\x1b]52" not in written, "the model's name wrote the clipboard"
    assert b"\x1b[31mname" not in written, "the file's name coloured the screen"
    # Textual's own OSC 22 (the mouse pointer's shape) ends with BEL; no other BEL may be written
    assert b"\x07" not in re.sub(rb"\x1b\]22;[a-z-]*\x07", b"", written)


async def test_a_reply_with_escape_sequences_is_drawn_visibly(shelf: Path) -> None:
    engine = FakeEngine(reply=f"Look: {CLIPBOARD} and \x1b[2J done.")
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        chat = await loaded_chat(app, pilot)
        await send(app, pilot, "Hello")
        await wait_for(pilot, reply_done(app))
        await pilot.pause(0.2)
        reply = list(chat.query(MessageView))[-1]
        assert reply.text.startswith("Look:")  # kept as the model wrote it, in the store too
        drawn = "\n".join(screen_text(app))
        assert "\x1b" not in drawn and "\x07" not in drawn
        assert "\\x1b]52;c;aGk=\\x07" in drawn and "\\x1b[2J done." in drawn


# -- 2. after the engine crashes and the model is reloaded, the chat draws what comes next ----------------


@pytest.mark.llama
async def test_after_a_crash_and_a_reload_the_next_question_and_answer_are_drawn(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path / "endless.gguf", ENDLESS)
    app = make_app(None, model=str(model), settings=Settings(scan_known_caches=False, max_tokens=24), real_engine=True)
    pieces: list[str] = []

    def hook(message: object) -> None:
        if isinstance(message, ReplyPiece):
            pieces.append(message.text)

    async with app.run_test(size=(160, 45), message_hook=hook) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=60)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        app.settings.max_tokens = 30_000  # a long story, killed mid-reply (thousands of tokens a second here)
        await send(app, pilot, "Tell me a long story")
        # counted in pieces streamed, not characters: a random model's bytes need not make text on every machine
        await wait_for(pilot, lambda: chat.generating and len(pieces) >= 5, 60)
        pid = app.session.engine.pid
        assert pid is not None
        os.kill(pid, signal.SIGSEGV)
        await wait_for(pilot, lambda: not chat.generating, 30)
        await wait_for(pilot, lambda: _on_screen(app, "Reload"), 30)  # the dialog says what happened
        await pilot.press("enter")  # Reload
        await wait_for(pilot, lambda: app.screen is chat and not chat.loading and app.session.engine.loaded, 60)
        app.settings.max_tokens = 8
        await send(app, pilot, "What is the capital of Germany?")
        await wait_for(pilot, reply_done(app), 60)
        await pilot.pause(0.3)
        views = list(chat.query(MessageView))
        assert [v.role for v in views] == ["user", "assistant", "user", "assistant"]
        visible = chat.messages.region
        for view in views[2:]:  # the question and its answer are drawn inside the list, not below it
            assert visible.contains_region(view.region), (view.role, view.region, visible)
        assert _on_screen(app, "What is the capital of Germany?")


# -- 4. a reply whose rendering shows no text shows its text -------------------------------------------------


async def test_a_reply_markdown_draws_as_nothing_shows_its_text(shelf: Path) -> None:
    engine = FakeEngine(reply=" ".join(f"{n}." for n in range(1, 125)))  # " 1. 2. 3. ... 124."
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        chat = await loaded_chat(app, pilot)
        await send(app, pilot, "Count")
        await wait_for(pilot, reply_done(app))
        await pilot.pause(0.2)
        reply = list(chat.query(MessageView))[-1]
        assert reply.has_class("-plain")
        assert _on_screen(app, "1. 2. 3. 4.") and _on_screen(app, "124.")
        # an ordinary reply stays Markdown
        engine.reply = "A **bold** answer."
        await send(app, pilot, "Again")
        await wait_for(pilot, reply_done(app))
        await pilot.pause(0.2)
        assert not list(chat.query(MessageView))[-1].has_class("-plain")
        assert _on_screen(app, "A bold answer.")


async def test_the_hub_view_shows_no_id_or_file_name_of_a_servers_making_raw(
    hub: LocalHub, shelf: Path, zoo: dict[str, Path]
) -> None:
    hub.add_repo(f"acme/{CLIPBOARD}", {"tiny-F16.gguf": zoo["llama-f16"]}, downloads=5000)  # no id the hub has
    hub.add_repo("acme/evil-GGUF", {"evil\x1b[31m-F16.gguf": zoo["llama-f16"]}, downloads=4000)
    app = make_app(shelf)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, HubScreen))
        screen = app.screen
        assert isinstance(screen, HubScreen)
        await wait_for(pilot, lambda: bool(screen.repos) and len(screen.fits) == len(screen.repos))
        assert [r.repo_id for r in screen.repos][:1] == ["acme/evil-GGUF"]  # the impossible id left out
        table = screen.query_one("#hub-repos", DataTable)
        table.focus()
        table.move_cursor(row=table.get_row_index("acme/evil-GGUF"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "refused the file name" in "\n".join(screen_text(app)), timeout=30)
        drawn = "\n".join(screen_text(app)) + "\n".join(str(n.message) for n in app._notifications)
        assert "\x1b" not in drawn and "\x07" not in drawn
        assert "\\x1b[31m" in drawn  # the file's name, or the refusal that names it, drawn visibly
