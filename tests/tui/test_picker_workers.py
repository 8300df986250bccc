"""The picker's first start with a long list: the rows are planned in worker processes beside the UI
(app.catalog_workers), every row gets its badge, and the plan cache keeps them for the next start."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable

import app.catalog
from app.catalog_workers import WORKERS_SWITCH
from app.tui.screens.picker import PickerScreen
from tests.support.tui_helpers import make_app, picker_ready, wait_for


async def test_a_long_list_is_planned_in_workers_and_every_row_gets_its_badge(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    monkeypatch.setenv(WORKERS_SWITCH, "2")
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    for name in list(zoo)[:50]:
        shutil.copy(zoo[name], shelf / f"{name}.gguf")

    def not_here(*args: object) -> None:
        raise AssertionError("planned in the UI's process")

    monkeypatch.setattr(app.catalog, "summarize", not_here)  # the workers are other processes: unaffected
    vramchat = make_app(shelf)
    async with vramchat.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(vramchat), timeout=60)
        screen = vramchat.screen
        assert isinstance(screen, PickerScreen)
        table = screen.query_one("#models", DataTable)
        fits = [str(table.get_cell(key, "fit")) for key in table.rows]
        assert len(fits) == 50
        assert all(fit.startswith(("full GPU", "partial", "CPU only")) for fit in fits), fits
        assert "50 models" in screen.sub_title
    again = make_app(shelf)  # the next start reads every badge from the cache
    async with again.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(again), timeout=60)
        table = again.screen.query_one("#models", DataTable)
        assert sorted(str(table.get_cell(key, "fit")) for key in table.rows) == sorted(fits)
