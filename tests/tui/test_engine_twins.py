"""The real engine's twins of what the fast UI tests do with tests.support.fake_engine: a model loaded from the
picker with its buffers as planned, a reply streamed and stopped with Esc, a file llama.cpp refuses told in a
dialog, and an engine process killed between replies noticed and reloaded. The app, the engine process and
llama.cpp are all real here; the model is the zoo's endless tiny llama (it never ends a reply by itself)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from app.settings import Settings
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dialogs import ConfirmDialog
from app.tui.screens.picker import PickerScreen
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_view import MessageView
from tests.support.compare import DRY_RUN_TOLERANCE
from tests.support.tiny import ENDLESS, write_tiny_model
from tests.support.tui_helpers import make_app, model_loaded, open_chat, picker_ready, reply_done, send, wait_for

pytestmark = pytest.mark.llama
SIZE = (120, 40)


@pytest.fixture
def endless_shelf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the endless tiny llama, planned for this machine's own devices."""
    monkeypatch.delenv("VRAMCHAT_DEVICES", raising=False)
    root = tmp_path / "shelf"
    root.mkdir()
    write_tiny_model(root / "endless.gguf", ENDLESS)
    return root


def _settings() -> Settings:
    # the whole context at load (no growth), so that the loaded plan is the one the buffers are held to
    return Settings(scan_known_caches=False, max_tokens=16000, temperature=0.0, elastic_context=False)


async def test_a_load_from_the_picker_a_streamed_reply_and_escape_with_the_real_engine(endless_shelf: Path) -> None:
    app = make_app(endless_shelf, settings=_settings(), real_engine=True)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        loaded = app.session.model
        assert loaded is not None and app.session.engine.pid is not None
        # every buffer llama.cpp logged for the load is the plan's, to its log's 0.01 MiB
        allocated = {
            (kind, name): size for kind, table in loaded.report.measurements.tables() for name, size in table.items()
        }
        planned: dict[tuple[str, str], int] = {}
        for buffer in loaded.plan.buffers:
            planned[(buffer.kind, buffer.name)] = planned.get((buffer.kind, buffer.name), 0) + buffer.bytes
        assert allocated.keys() == planned.keys()
        assert all(abs(allocated[k] - planned[k]) <= DRY_RUN_TOLERANCE for k in planned), (allocated, planned)

        chat.query_one(ChatInput).focus()
        await pilot.press(*"Tell me a story", "enter")
        engine = app.session.engine
        await wait_for(pilot, lambda: chat.generating and engine.last_stats.generated_tokens >= 8)
        await pilot.press("escape")
        await wait_for(pilot, reply_done(app))
        assert engine.last_stats.stopped_by == "user" and engine.last_stats.generated_tokens < 16000
        await pilot.pause(0.05)
        reply = app.store.conversation(chat.conversation.id).messages[-1]  # type: ignore[union-attr]
        assert reply.state == "partial" and reply.content
        view = list(chat.query(MessageView))[-1]
        assert "stopped" in view.note and view.text == reply.content


async def test_a_file_llama_cpp_refuses_is_a_dialog_not_a_traceback_with_the_real_engine(endless_shelf: Path) -> None:
    """A tokenizer llama.cpp does not know ("zzzzz" for "llama", in place): the header plans (the planner reads no
    tokenizer), llama.cpp refuses the file; the app says so in a dialog and goes back to the picker."""
    model = endless_shelf / "endless.gguf"
    data = bytearray(model.read_bytes())
    key = data.index(b"tokenizer.ggml.model") + len(b"tokenizer.ggml.model")
    assert data[key + 12 : key + 17] == b"llama"  # after the value's type (u32) and length (u64)
    data[key + 12 : key + 17] = b"zzzzz"
    model.write_bytes(data)
    app = make_app(endless_shelf, settings=_settings(), real_engine=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        assert app.screen.plan_state == "ready"  # type: ignore[attr-defined]
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), timeout=60)
        text = str(app.screen.query_one(".dialog-text").render())
        assert "Traceback" not in text and "unknown tokenizer: 'zzzzz'" in text, text  # llama.cpp's own words
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        assert app.session.model is None


async def test_an_engine_killed_while_idle_is_noticed_and_reloaded_with_the_real_engine(endless_shelf: Path) -> None:
    app = make_app(endless_shelf, settings=_settings(), real_engine=True)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        assert isinstance(chat, ChatScreen)
        first = app.session.engine.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)  # kill -9 between replies (the OOM killer, a user)
        await wait_for(pilot, lambda: "not loaded: the engine stopped" in str(chat.sub_title))
        assert "F5 reloads" in str(chat.query_one("#context-line").render())
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("enter")  # the dialog's Reload
        await wait_for(pilot, model_loaded(app), timeout=60)
        assert app.session.engine.pid not in (None, first)  # a new engine process
        await send(app, pilot, "And now?")
        await wait_for(pilot, lambda: app.session.engine.last_stats.generated_tokens >= 4)
        await pilot.press("escape")
        await wait_for(pilot, reply_done(app))
        assert list(chat.query(MessageView))[-1].text  # answered by the new process
