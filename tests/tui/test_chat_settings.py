"""Settings per chat: the system prompt and sampling kept with the chat and used for its replies, the
model file's own sampling (general.sampling.*) beneath, presets, and the line that says they are on."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.conversation.sampling import ChatSampling, parse, preset
from app.tui.screens.dialogs import ChatSettingsDialog
from app.tui.widgets.chat.settings_line import SettingsLine
from tests.support.fake_engine import FakeEngine
from tests.support.tiny import ZOO, write_tiny_model
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, send_and_wait, wait_for

SIZE = (80, 24)


@pytest.fixture
def shelf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A model whose file carries its authors' sampling, as Qwen3's and Gemma 3's GGUFs do."""
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    root = tmp_path / "shelf"
    root.mkdir()
    spec = ZOO["llama-f16"].with_(
        extra_kv={"general.sampling.temp": 0.6, "general.sampling.top_k": 20, "general.sampling.top_p": 0.95}
    )
    write_tiny_model(root / "sampled.gguf", spec)
    return root


async def test_a_chats_sampling_is_its_own_over_the_model_files(shelf: Path) -> None:
    engine = FakeEngine(reply="ok")
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        chat = app.screen
        await send_and_wait(app, pilot, "hello")
        used = engine.params[-1]
        assert (used.temperature, used.top_k, used.top_p) == (pytest.approx(0.6), 20, pytest.approx(0.95))
        line = chat.query_one(SettingsLine)
        assert not line.display  # nothing of the chat's own: no line

        # what the slash commands call: this chat only
        assert chat.controller.set_setting("temp", "0.9") == "temperature 0.9 for this chat."
        assert chat.controller.set_setting("system", "Answer in French.") == "System prompt set for this chat."
        with pytest.raises(ValueError, match="between 0 and 2"):
            chat.controller.set_setting("temp", "7")
        await pilot.pause()
        assert line.display and "temp 0.9" in str(line.render()) and "Answer in French" in str(line.render())
        await send_and_wait(app, pilot, "again")
        assert engine.params[-1].temperature == pytest.approx(0.9)
        conv_id = chat.conversation.id
        assert app.store.conversation(conv_id).settings == {"temperature": 0.9}

        # a new chat starts from the model's own again
        await pilot.press("ctrl+n")
        await pilot.pause()
        await send_and_wait(app, pilot, "new chat")
        assert engine.params[-1].temperature == pytest.approx(0.6)

        # F4 edits the open chat's settings; a preset fills the sampling; the model's own are named
        await pilot.press("f4")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ChatSettingsDialog)
        assert "carries its own: temp 0.6, top-p 0.95, top-k 20" in str(dialog.query_one(".dialog-note").render())
        await pilot.click("#preset-creative")
        await pilot.press("ctrl+s")
        await pilot.pause()
        await send_and_wait(app, pilot, "creative now")
        assert (engine.params[-1].temperature, engine.params[-1].top_k) == (1.0, 100)
        assert app.store.conversation(conv_id).settings == {"temperature": 0.9}  # the other chat kept its own


def test_typed_values_and_presets() -> None:
    assert parse("top-p", "0.9") == 0.9 and parse("seed", "42") == 42 and parse("temp", "default") is None
    assert parse("thinking", "on") is True
    with pytest.raises(ValueError, match="no setting named"):
        parse("warmth", "1")
    with pytest.raises(ValueError, match="number"):
        parse("top-k", "many")
    kept = ChatSampling(seed=7, max_tokens=99, temperature=0.1)
    assert preset("precise", kept).seed == 7 and preset("precise", kept).temperature == 0.2
    assert ChatSampling.from_json({"temperature": 9, "top_k": 20, "thinking": "yes"}) == ChatSampling(top_k=20)
