"""An estimated plan checked by llama.cpp in the background: the picker's badge turns from "estimate"
to "checked" soon after the list is drawn, without holding the list up; the plan cache keeps it, so
`vramchat --list` says "checked" too (real engine process, real dry runs, this machine's devices)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable

from app import cli
from app.cli import listing
from app.tui.screens.picker import PickerScreen
from app.tui.screens.picker_controller import PickerController
from tests.support.tiny import TinySpec, write_tiny_model
from tests.support.tui_helpers import make_app, picker_ready, wait_for

pytestmark = pytest.mark.llama


@pytest.fixture
def estimated_shelf(tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny Baichuan, with the planner's Baichuan rules taken away for the test: its plan is an
    estimate, while llama.cpp (in the engine process) loads it as it always does; llama is exact.
    (Every architecture llama.cpp loads with a plain decoder's tensors is exact now.)"""
    from planner import archs

    monkeypatch.delitem(archs.FAMILIES, "baichuan")
    root = tmp_path / "shelf"
    root.mkdir()
    write_tiny_model(root / "tiny-baichuan.gguf", TinySpec("baichuan", name="Tiny Baichuan"))
    (root / "llama-f16.gguf").write_bytes(zoo["llama-f16"].read_bytes())
    return root


async def test_an_estimate_turns_checked_soon_after_the_list_and_the_list_says_so(
    estimated_shelf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(estimated_shelf, real_engine=True)
    estimated = str(estimated_shelf / "tiny-baichuan.gguf")
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        table = screen.query_one("#models", DataTable)

        def badge() -> str:
            return str(table.get_cell(estimated, "fit")) if estimated in table.rows else ""

        await wait_for(pilot, lambda: badge() not in ("", "planning…"))
        listed = time.monotonic()
        assert badge().endswith("· estimate")  # drawn with the estimate; the check comes after
        # the list answers while llama.cpp checks: the cursor moves at once
        row = table.cursor_row
        await pilot.press("down" if row == 0 else "up")
        await pilot.pause(0.05)
        assert table.cursor_row != row
        await wait_for(pilot, lambda: badge().endswith("· checked"), timeout=10)
        took = time.monotonic() - listed
        assert took < 2.5, f"the badge turned checked {took:.2f} s after the list"
        await wait_for(pilot, picker_ready(app))
        # the exact model is never sent to the dry run; only the estimate is
        assert "estimate" not in str(table.get_cell(str(estimated_shelf / "llama-f16.gguf"), "fit"))
        assert "checked" not in str(table.get_cell(str(estimated_shelf / "llama-f16.gguf"), "fit"))
        # selected, the checked model shows the plan llama.cpp's figures fit, and says so
        table.move_cursor(row=table.get_row_index(estimated))
        await wait_for(pilot, lambda: screen.selected == estimated and screen.plan_state == "ready")
        await wait_for(pilot, lambda: "Checked by llama.cpp" in str(screen.query_one("#plan-verdict").render()))
        assert screen.result is screen.checked_fits[estimated]
        assert not any("no exact rules" in e for e in screen.result.plan.estimates)

    monkeypatch.setattr(listing, "_demo_for_list", lambda: None)
    assert cli.main(["--list", "--models-dir", str(estimated_shelf)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "Tiny Baichuan" in line)
    assert "· checked" in line and "· estimate" not in line


async def test_simulated_devices_leave_the_estimate_unchecked(
    estimated_shelf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp can only check against this machine's devices: with simulated ones the badge says
    "estimate" and no dry run starts."""
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB,ram=32GiB")
    app = make_app(estimated_shelf, real_engine=True)
    started: list[object] = []
    real = app.services.dry_runner
    app.services.dry_runner = lambda: started.append(1) or real()  # type: ignore[method-assign]
    estimated = str(estimated_shelf / "tiny-baichuan.gguf")
    offered: list[str] = []  # the rows the picker decided on: a check would have started in that same call
    queue_checks = PickerController.queue_checks

    def recorded(work, entries, again=False):
        queue_checks(work, entries, again)
        offered.extend(e.file.entry_id for e in entries if e.summary is not None)

    monkeypatch.setattr(PickerController, "queue_checks", recorded)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, picker_ready(app))
        await wait_for(pilot, lambda: estimated in offered)  # the estimate was planned and offered for a check
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        table = screen.query_one("#models", DataTable)
        assert str(table.get_cell(estimated, "fit")).endswith("· estimate")
        assert not screen.work.checking and not screen.work.checks_asked  # no check was started nor queued
    assert not started


class _RecordedRunner:
    """The picker's dry-run engine, with every dry run it is asked for recorded (the model's path)."""

    def __init__(self, engine: object, ran: list[str]) -> None:
        self._engine, self._ran = engine, ran

    def dry_run(self, path: str, config: object) -> object:
        self._ran.append(str(path))
        return self._engine.dry_run(path, config)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._engine, name)


def _record_dry_runs(app) -> list[str]:
    ran: list[str] = []
    real = app.services.dry_runner

    def recorded():
        runner, close = real()
        return _RecordedRunner(runner, ran), close

    app.services.dry_runner = recorded
    return ran


async def test_a_checked_row_is_read_from_the_cache_before_any_dry_run_and_selected_shows_the_checked_plan(
    estimated_shelf: Path,
) -> None:
    """The next start reads "checked" from the plan cache: the badge says so while no dry run has run; selected,
    the row's plan is checked once more by llama.cpp's dry run, and the plan shown is the one it checked."""
    estimated = str(estimated_shelf / "tiny-baichuan.gguf")
    first = make_app(estimated_shelf, real_engine=True)
    async with first.run_test(size=(160, 45)) as pilot:
        table = first.screen.query_one("#models", DataTable)
        await wait_for(
            pilot, lambda: estimated in table.rows and str(table.get_cell(estimated, "fit")).endswith("checked")
        )
    again = make_app(estimated_shelf, real_engine=True)
    ran = _record_dry_runs(again)
    async with again.run_test(size=(160, 45)) as pilot:
        screen = again.screen
        assert isinstance(screen, PickerScreen)
        table = screen.query_one("#models", DataTable)
        await wait_for(pilot, lambda: estimated in table.rows and str(table.get_cell(estimated, "fit")) != "planning…")
        assert str(table.get_cell(estimated, "fit")).endswith("· checked")
        assert ran == []  # from the cache: no dry run has run
        table.move_cursor(row=table.get_row_index(estimated))
        await wait_for(pilot, lambda: "Checked by llama.cpp" in str(screen.query_one("#plan-verdict").render()))
        await wait_for(
            pilot, lambda: estimated in screen.checked_fits and screen.result is screen.checked_fits[estimated]
        )
        assert ran and set(ran) == {estimated}  # checked once more, in the background, the selected row only


class _HeldRunner(_RecordedRunner):
    """A dry-run engine that checks one model, then holds every later check until the test lets it go."""

    def __init__(self, engine: object, ran: list[str], release: threading.Event) -> None:
        super().__init__(engine, ran)
        self._release = release

    def dry_run(self, path: str, config: object) -> object:
        if self._ran:
            self._ran.append(str(path))
            self._release.wait(timeout=60)
            return self._engine.dry_run(path, config)  # type: ignore[attr-defined]
        return super().dry_run(path, config)


async def test_a_badge_that_says_checked_is_on_disk_already_while_the_next_row_is_still_being_checked(
    estimated_shelf: Path,
) -> None:
    """A user who quits as soon as a badge turns "checked" finds it checked next time, even while another row's
    check is still running (held here): the cache is written before the badge changes, not after the last check."""
    from app.caches.plans import PlanCache

    write_tiny_model(estimated_shelf / "tiny-baichuan-2.gguf", TinySpec("baichuan", name="Tiny Baichuan Two"))
    paths = {str(estimated_shelf / "tiny-baichuan.gguf"): "Tiny Baichuan"}
    paths[str(estimated_shelf / "tiny-baichuan-2.gguf")] = "Tiny Baichuan Two"
    app = make_app(estimated_shelf, real_engine=True)
    ran: list[str] = []
    release = threading.Event()
    real = app.services.dry_runner

    def held():
        runner, close = real()
        return _HeldRunner(runner, ran, release), close

    app.services.dry_runner = held
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            table = app.screen.query_one("#models", DataTable)
            await wait_for(pilot, lambda: all(path in table.rows for path in paths))
            await wait_for(pilot, lambda: bool(ran) and str(table.get_cell(ran[0], "fit")).endswith("· checked"))
            await wait_for(pilot, lambda: len(ran) == 2)  # the other row's check has begun, and is held
            assert not str(table.get_cell(ran[1], "fit")).endswith("· checked")
            on_disk = PlanCache(app.services.plan_cache.path)
            checked_names = {summary.name for summary in _summaries(on_disk) if summary.checked}
            assert checked_names == {paths[ran[0]]}
    finally:
        release.set()


def _summaries(cache) -> list:
    from app.caches.plans import ModelSummary

    return [ModelSummary.from_json(entry["summary"]) for entry in cache._entries.values()]
