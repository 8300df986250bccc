"""The picker's first start with a long list: the rows are planned in worker processes beside the UI
(app.catalog_workers), every row gets its badge, and the plan cache keeps them for the next start."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

import app.catalog
from app.catalog_workers import WORKERS_SWITCH
from app.tui.screens.picker import PLAN_DEBOUNCE, PickerScreen
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


async def test_the_knobs_come_after_the_first_frame_and_the_selection_is_planned_once(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's knobs are mounted after the picker's first frame (their styles are a third of its start):
    that frame has the list; the knobs then say what the selection was planned with, which asks no second
    plan; a knob changed by hand plans again."""
    from textual.screen import Screen
    from textual.widgets import Input

    from app.planning import PlanChoice
    from app.tui.screens.picker_controller import PickerController

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    for name in list(zoo)[:3]:
        shutil.copy(zoo[name], shelf / f"{name}.gguf")
    plans: list[PlanChoice] = []
    plan = PickerController.plan

    def counted(self: PickerController, path: str, choice: PlanChoice, *args: Any, **kwargs: Any) -> None:
        plans.append(choice)
        plan(self, path, choice, *args, **kwargs)

    monkeypatch.setattr(PickerController, "plan", counted)
    frames: list[tuple[int, bool]] = []
    draw = Screen._compositor_refresh

    def seen(screen: Screen) -> None:
        if isinstance(screen, PickerScreen):
            frames.append((screen.query_one("#models", DataTable).row_count, screen.panel.knobs_mounted))
        draw(screen)

    monkeypatch.setattr(Screen, "_compositor_refresh", seen)
    monkeypatch.setattr("app.tui.screens.picker_controller.FIRST_LIST_WAIT", 30.0)
    app = make_app(shelf)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(app), timeout=60)
        await pilot.pause(PLAN_DEBOUNCE * 2)  # a second plan, had one been asked, would have started
        assert frames[0] == (3, False), frames
        assert len(plans) == 1, plans
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        screen.query_one("#ctx", Input).value = "4096"
        await wait_for(pilot, lambda: len(plans) == 2, timeout=30)
        assert plans[-1].n_ctx == 4096


async def test_a_workers_message_still_queued_when_the_app_quits_is_dropped(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl+Q while models are planned: the plans the scan posts find the picker's widgets removed, and are
    dropped rather than ending vramchat on an error (`vramchat stopped on an unexpected error`)."""
    from app.tui.messages import EntriesPlanned, ScanStatus

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    shutil.copy(zoo[next(iter(zoo))], shelf / "one.gguf")
    app = make_app(shelf)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(app), timeout=60)
        picker = app.screen
        assert isinstance(picker, PickerScreen)
        entries = list(picker.entries.values())
    assert not app.is_running and not picker.query("#models")  # quit: the list is gone
    with app._context():  # as the app's loop would handle them, while it closes
        picker.on_entries_planned(EntriesPlanned(entries, "planning", 1, 2))
        picker.on_scan_status(ScanStatus("Looking in the models folder"))


async def test_the_key_bar_is_composed_once_as_the_picker_starts_and_again_when_its_keys_change(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Textual composes the footer's keys again whenever a screen's bindings are refreshed (the knobs mounting,
    a focus moving): here only a change of the keys it shows does."""
    from textual.widgets._footer import FooterKey

    from app.tui.widgets.footer import AdaptiveFooter

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    shutil.copy(zoo[next(iter(zoo))], shelf / "one.gguf")
    composed: list[int] = []
    compose = AdaptiveFooter.compose

    def counted(footer: AdaptiveFooter) -> Any:
        keys = list(compose(footer))
        composed.append(len(keys))
        return iter(keys)

    monkeypatch.setattr(AdaptiveFooter, "compose", counted)
    app = make_app(shelf)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(app), timeout=60)
        await pilot.pause(0.3)
        with_keys = [n for n in composed if n]
        assert len(with_keys) == 1, composed  # once the bindings are known; the knobs' mount composes nothing
        app.bind("f12", "app.bell", description="Ring")
        app.screen.refresh_bindings()
        footer = app.screen.query_one(AdaptiveFooter)
        await wait_for(pilot, lambda: any(k.description == "Ring" for k in footer.query(FooterKey)), timeout=10)
