"""The model list remembers and tidies: a downloaded model (with its projector) deleted after a confirm
that says what it frees, a user's own file refused; the model loaded last selected at the next start;
`--continue` (and its setting) opening the last chat with its model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable

from app.paths import models_dir
from app.settings import Settings, load_settings, save_settings
from app.sources.downloaded import NotOurs, plan_deletion
from app.store import Store
from app.tui.app import AppOptions, VramchatApp
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dialogs import ConfirmDialog
from app.tui.screens.picker import PickerScreen
from app.tui.widgets.message_view import MessageView
from tests.support.fake_engine import FakeEngine
from tests.support.tiny_projectors import PROJECTORS, write_tiny_projector
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, wait_for

SIZE = (120, 40)


def notices(app: VramchatApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


@pytest.fixture
def shelves(tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A model vramchat downloaded (models/acme/tiny-GGUF, with a projector), and a folder of the user's own."""
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    repo = models_dir() / "acme" / "tiny-GGUF"
    repo.mkdir(parents=True)
    shutil.copy(zoo["llama-f16"], repo / "tiny-F16.gguf")
    write_tiny_projector(repo / "mmproj-F16.gguf", PROJECTORS["gemma3"])
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(zoo["qwen3-hd"], mine / "my-own.gguf")
    return repo, mine


async def _choose(app: VramchatApp, pilot, file_name: str) -> PickerScreen:
    picker = app.screen
    assert isinstance(picker, PickerScreen)
    path = next(p for p in picker.entries if Path(p).name == file_name)
    table = picker.query_one("#models", DataTable)
    table.move_cursor(row=table.get_row_index(path))
    await wait_for(pilot, lambda: picker.selected == path and picker.plan_state == "ready")
    return picker


async def test_delete_frees_a_downloaded_model_and_its_projector_after_asking(shelves: tuple[Path, Path]) -> None:
    repo, mine = shelves
    size = (repo / "tiny-F16.gguf").stat().st_size + (repo / "mmproj-F16.gguf").stat().st_size
    app = make_app(mine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        picker = await _choose(app, pilot, "tiny-F16.gguf")
        await pilot.press("delete")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        text = app.screen.text  # type: ignore[attr-defined]
        from planner.units import format_size

        assert f"freeing {format_size(size)}" in text and "mmproj-F16.gguf" in text and "tiny-F16.gguf" in text
        await pilot.click("#confirm")
        await wait_for(pilot, lambda: not (repo / "tiny-F16.gguf").exists())
        assert not (models_dir() / "acme").exists()  # the folders it left empty go too
        assert all(Path(p).name != "tiny-F16.gguf" for p in picker.entries)
        assert picker.selected is not None and Path(picker.selected).name == "my-own.gguf"
        assert any(f"{format_size(size)} freed" in n for n in notices(app))

        await pilot.press("delete")  # the user's own file: refused, kept
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDialog)
        assert any("a folder of your own" in n for n in notices(app))
        assert (mine / "my-own.gguf").exists()


async def test_cancel_deletes_nothing(shelves: tuple[Path, Path]) -> None:
    repo, mine = shelves
    app = make_app(mine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await _choose(app, pilot, "tiny-F16.gguf")
        await pilot.press("delete")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        assert (repo / "tiny-F16.gguf").exists() and (repo / "mmproj-F16.gguf").exists()


def test_a_projector_another_quant_still_uses_stays(shelves: tuple[Path, Path], zoo: dict[str, Path]) -> None:
    repo, mine = shelves
    shutil.copy(zoo["llama-f16"], repo / "tiny-Q8_0.gguf")
    deletion = plan_deletion([str(repo / "tiny-F16.gguf")], [str(repo / "mmproj-F16.gguf")])
    assert deletion.files == (repo / "tiny-F16.gguf",)
    with pytest.raises(NotOurs, match="a folder of your own"):
        plan_deletion([str(mine / "my-own.gguf")], [])
    with pytest.raises(NotOurs, match="demo model"):
        plan_deletion([str(models_dir() / "gemma-3-270m-q4_k_m.gguf")], [], is_demo=True)


async def test_the_model_loaded_last_is_selected_at_the_next_start(shelves: tuple[Path, Path]) -> None:
    _repo, mine = shelves
    save_settings(Settings(scan_known_caches=False))
    app = make_app(mine, settings=load_settings()[0])
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        assert Path(str(app.screen.selected)).name != "tiny-F16.gguf"  # type: ignore[attr-defined]
        await _choose(app, pilot, "tiny-F16.gguf")
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
    assert Path(load_settings()[0].last_model).name == "tiny-F16.gguf"

    again = make_app(mine, settings=load_settings()[0])
    async with again.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(again))
        assert Path(str(again.screen.selected)).name == "tiny-F16.gguf"  # type: ignore[attr-defined]
        assert again.session.model is None  # selected, not loaded


def _chats(model: Path) -> int:
    """Two chats; the later one (returned) held with `model`."""
    store = Store()
    try:
        old = store.new_conversation("/gone/old.gguf", "Old")
        store.add_message(old.id, "user", "an older question")
        last = store.new_conversation(str(model), "Tiny", title="the last chat")
        store.add_message(last.id, "user", "where were we?")
        store.add_message(last.id, "assistant", "at the second turn")
        return last.id
    finally:
        store.close()


async def test_continue_opens_the_last_chat_with_its_model(shelves: tuple[Path, Path]) -> None:
    _repo, mine = shelves
    last = _chats(mine / "my-own.gguf")
    options = AppOptions(models_dirs=[str(mine)], include_demo=False, continue_chat=True)
    fake = FakeEngine()
    options.engine_factory = lambda: fake
    app = VramchatApp(options, Settings(scan_known_caches=False))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, model_loaded(app))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        assert app.session.model is not None and Path(app.session.model.path).name == "my-own.gguf"
        assert chat.conversation is not None and chat.conversation.id == last
        await wait_for(pilot, lambda: len(chat.query(MessageView)) == 2)
        assert "at the second turn" in [v.text for v in chat.query(MessageView)]


async def test_continue_when_the_last_chats_model_is_gone_says_so_and_opens_it_with_the_next_load(
    shelves: tuple[Path, Path], tmp_path: Path
) -> None:
    _repo, mine = shelves
    gone = tmp_path / "gone.gguf"
    last = _chats(gone)
    options = AppOptions(models_dirs=[str(mine)], include_demo=False, continue_chat=True)
    fake = FakeEngine()
    options.engine_factory = lambda: fake
    app = VramchatApp(options, Settings(scan_known_caches=False))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        assert any("not on this machine any more" in n for n in notices(app))
        session = app.services.started_session()
        assert session is None or session.model is None  # nothing loaded until the user says which
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        chat = app.screen
        assert isinstance(chat, ChatScreen) and chat.conversation is not None and chat.conversation.id == last


def test_continue_is_the_apps_own(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`vramchat --continue` starts the app asked to continue; the setting does it for a start with no MODEL;
    with another mode it is a usage error."""
    import app.tui
    import app.tui.guard
    from app.cli import main

    seen: list[AppOptions] = []
    monkeypatch.setattr(app.tui.guard, "run_guarded", lambda run: run())
    monkeypatch.setattr(app.tui, "run", lambda options: seen.append(options) or 0)
    assert main(["--continue"]) == 0 and seen[-1].continue_chat
    assert main([]) == 0 and not seen[-1].continue_chat
    save_settings(Settings(continue_last_chat=True))
    assert main([]) == 0 and seen[-1].continue_chat
    assert main(["--continue", "demo", "-p", "hi"]) == 2
    assert "--continue opens the app on the last chat" in capsys.readouterr().err


async def test_f1_and_the_palette_list_delete_and_continue(shelves: tuple[Path, Path]) -> None:
    from app.tui.screens.help import HELP

    assert "`Delete`" in HELP and "vramchat --continue" in HELP
    _repo, mine = shelves
    app = make_app(mine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        commands = {c.title: c.callback for c in app.get_system_commands(app.screen)}
        assert "Delete the selected model" in commands
        commands["Start on the last chat: off (turn on)"]()
        assert load_settings()[0].continue_last_chat
