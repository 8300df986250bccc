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


async def test_a_quick_scan_is_drawn_in_the_pickers_first_frame(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start with the plans cached: the first frame the picker draws already shows the list (no empty list
    drawn first, a frame before it)."""
    from textual.screen import Screen

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    for name in list(zoo)[:12]:
        shutil.copy(zoo[name], shelf / f"{name}.gguf")
    first = make_app(shelf)  # plans every model and keeps the plans
    async with first.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(first), timeout=60)

    rows_per_frame: list[int] = []
    draw = Screen._compositor_refresh

    def counted(screen: Screen) -> None:
        if isinstance(screen, PickerScreen):
            rows_per_frame.append(screen.query_one("#models", DataTable).row_count)
        draw(screen)

    monkeypatch.setattr(Screen, "_compositor_refresh", counted)
    monkeypatch.setattr("app.tui.screens.picker_controller.FIRST_LIST_WAIT", 30.0)  # whatever this machine's speed
    again = make_app(shelf)
    async with again.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(again), timeout=60)
    assert rows_per_frame and rows_per_frame[0] == 12, rows_per_frame
