"""Ollama's models in the model list: a row a name (two names of one blob are two rows), the vision model
planned with the projector its manifest names, loaded by its row; Delete refuses and says `ollama rm`."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from app.tui.app import VramchatApp
from app.tui.screens.dialogs import ConfirmDialog
from app.tui.screens.picker import PickerScreen
from tests.support.ollama_store import manifest_path, pull
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, wait_for
from tests.support.vision import write_vision_pair

SIZE = (160, 48)


@pytest.fixture
def store(tmp_path: Path, zoo: dict[str, Path]) -> Path:
    root = tmp_path / "ollama-models"
    pull(root, "gemma3:270m", zoo["llama-q8_0"])
    pull(root, "gemma3:latest", zoo["llama-q8_0"])
    model, mmproj = write_vision_pair(tmp_path / "pair", "gemma3")
    pull(root, "vision:tiny", model, mmproj)
    return root


async def _choose(app: VramchatApp, pilot, store: Path, name: str) -> PickerScreen:
    picker = app.screen
    assert isinstance(picker, PickerScreen)
    key = str(manifest_path(store, name))
    table = picker.query_one("#models", DataTable)
    table.move_cursor(row=table.get_row_index(key))
    await wait_for(pilot, lambda: picker.selected == key and picker.plan_state == "ready")
    return picker


async def test_a_row_a_name_and_delete_says_ollama_rm(store: Path) -> None:
    app = make_app(store)  # given as --models-dir: a folder that is Ollama's store is read as one
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        picker = await _choose(app, pilot, store, "gemma3:latest")
        names = {e.name: e.file for e in picker.entries.values()}
        assert set(names) == {"gemma3:270m", "gemma3:latest", "vision:tiny"}
        assert names["gemma3:270m"].path == names["gemma3:latest"].path  # one blob, two rows
        assert all(f.source == "Ollama" for f in names.values())
        blob = Path(names["gemma3:latest"].path)

        await pilot.press("delete")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDialog)
        notices = [str(n.message) for n in app._notifications]
        assert any("ollama rm gemma3:latest" in n and "never deletes" in n for n in notices), notices
        assert blob.exists() and len(picker.entries) == 3

        vision = await _choose(app, pilot, store, "vision:tiny")
        assert vision.result is not None and vision.result.plan.projector is not None  # planned with it

        await _choose(app, pilot, store, "gemma3:270m")
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        assert app.session.model is not None and app.session.model.path == str(blob)
