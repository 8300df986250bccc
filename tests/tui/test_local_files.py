"""Local files that once stopped or hung the app (issue 36): a FIFO named like a model, a file name that is
not UTF-8, a data folder that cannot be written."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from textual.widgets import OptionList

from app.store import Store
from app.tui.screens.chat import ChatScreen
from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, reply_done, wait_for

SIZE = (160, 45)


@pytest.fixture
def shelf(tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch):
    """A real model, one whose name is Latin-1 bytes, a FIFO named x.gguf and a link to that FIFO."""
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    root = tmp_path / "shelf"
    root.mkdir()
    shutil.copy(zoo["llama-f16"], root / "real.gguf")
    shutil.copy(zoo["llama-f16"], root / os.fsdecode(b"caf\xe9.gguf"))
    os.mkfifo(root / "x.gguf")
    (root / "link-to-fifo.gguf").symlink_to(root / "x.gguf")
    yield root
    with contextlib.suppress(OSError):  # a reader left waiting on the FIFO by a failure goes
        os.close(os.open(root / "x.gguf", os.O_WRONLY | os.O_NONBLOCK))


async def test_the_picker_lists_beside_a_fifo_and_loads_a_name_that_is_not_utf8(shelf: Path) -> None:
    """The picker waited forever on x.gguf; b'caf\\xe9.gguf' could not be planned, and the first message on
    it stopped the app. Now the FIFO is left out, and the Latin-1 name plans, loads, answers and is saved."""
    name = os.fsdecode(b"caf\xe9.gguf")
    app = make_app(shelf, FakeEngine(reply="Hello."))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        picker = app.screen
        listed = sorted(os.path.basename(p) for p in picker.entries)  # type: ignore[attr-defined]
        assert listed == sorted([name, "real.gguf"])
        picker.select(str(shelf / name))  # type: ignore[attr-defined]
        await wait_for(pilot, picker_ready(app))
        assert picker.plan_state == "ready"  # type: ignore[attr-defined]
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        chat = app.screen
        assert isinstance(chat, ChatScreen) and app.session.model.path == str(shelf / name)
        chat.query_one("#input").load_text("Hi")  # type: ignore[attr-defined]
        chat.query_one("#input").focus()
        await pilot.press("enter")
        await pilot.pause(0.05)
        await wait_for(pilot, reply_done(app))
        conv = app.store.conversation(chat.conversation.id)  # type: ignore[union-attr]
        assert conv.model_path == str(shelf / name) and [m.content for m in conv.messages] == ["Hi", "Hello."]


@pytest.fixture
def read_only_home(_private_home: Path):
    """vramchat's data folder holding two chats, made read-only even for root (chattr +i)."""
    data = _private_home / "data"
    data.mkdir(parents=True, exist_ok=True)
    store = Store(data / "conversations.sqlite3")
    for title in ("first chat", "second chat"):
        store.add_message(store.new_conversation("/m.gguf", "Model").id, "user", title)
    store.close()
    frozen = [str(p) for p in data.iterdir()] + [str(data)]
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", *frozen]).returncode != 0:
        pytest.skip("chattr +i is not available here")
    yield data
    subprocess.run(["chattr", "-i", *frozen], check=True)


async def test_ctrl_b_shows_the_chats_of_a_read_only_data_folder(
    zoo: dict[str, Path], tmp_path: Path, read_only_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(zoo["llama-f16"], models / "real.gguf")
    app = make_app(models, FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        assert any("The 2 chats in it can be read" in str(n.message) for n in app._notifications)
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await pilot.press("ctrl+b")
        await pilot.pause()
        options = chat.query_one("#chat-list", OptionList)
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert [label.splitlines()[0] for label in labels] == ["second chat", "first chat"]
