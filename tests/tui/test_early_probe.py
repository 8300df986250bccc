"""The device probe begun as the app starts (beside Textual's import): the picker's first list is planned
for that probe's devices, without probing again; a rescan probes afresh; a probe that failed is said."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from app.tui import early_probe
from app.tui.services import AppOptions, probe_for
from tests.support.tiny import TinySpec, write_tiny_model
from tests.support.tui_helpers import make_app, wait_for


def _shelf(tmp_path: Path) -> Path:
    write_tiny_model(tmp_path / "tiny-llama.gguf", TinySpec("llama", name="Tiny Llama"))
    return tmp_path


def _probes_counted(app) -> list[object]:
    probed: list[object] = []
    real = app.services.probe_devices

    def counted():
        report = real()
        probed.append(report)
        return report

    app.services.probe_devices = counted
    return probed


async def test_the_picker_plans_for_the_probe_begun_at_start_and_a_rescan_probes_again(tmp_path: Path) -> None:
    app = make_app(_shelf(tmp_path))  # this machine's devices
    early_probe.begin(
        partial(probe_for, AppOptions(vram="8GiB", ram="16GiB"))
    )  # the probe begun at start: a simulated 8 GiB GPU
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: _scanned(app))
            report = app.services.devices
            assert report is not None and [g.total for g in report.gpus] == [8 * 2**30]
            assert report.host.total == 16 * 2**30  # the begun probe's --ram, not the app's own options
            assert early_probe.take() is None  # taken once, by the first scan
            probed = _probes_counted(app)
            await pilot.press("f5")  # rescan
            await wait_for(pilot, lambda: bool(probed) and _scanned(app))
            assert probed[0] is not report and probed[0].host.total != 16 * 2**30  # probed afresh, the app's
    finally:
        early_probe.take()


async def test_a_probe_begun_at_start_that_failed_is_said_in_the_picker(tmp_path: Path) -> None:
    app = make_app(_shelf(tmp_path))
    early_probe.begin(partial(probe_for, AppOptions(vram="eight gigabytes")))
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: "eight gigabytes" in _status_text(app))
            assert app.services.devices is None
            screen = app.screen
            assert "Nothing planned" in str(screen.scan_bar.label.render())
            assert not screen.scan_bar.progress.display  # the bar no longer pulses "Probing devices…"
            await pilot.press("ctrl+l")  # Load: no plan will come, so none is promised
            await pilot.pause()
            said = [str(n.message) for n in app._notifications]
            assert any("until the device settings are mended" in text for text in said), said
            assert not any("as soon as the plan is ready" in text for text in said)
    finally:
        early_probe.take()


def _status_text(app) -> str:
    from textual.widgets import Static

    return " ".join(str(w.render()) for w in app.screen.query(Static))


def _scanned(app) -> bool:
    from app.tui.screens.picker import PickerScreen

    screen = app.screen
    return isinstance(screen, PickerScreen) and app.services.devices is not None and not screen._scanning
