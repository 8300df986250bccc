"""The drift alarm in the app: a simulated GPU whose use climbs past the plan while the model runs."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from app.tui.screens.dashboard import DashboardScreen
from planner.hardware import MiB
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, wait_for

SIZE = (160, 45)


def _alarms(app) -> list[str]:
    return [str(n.message) for n in app._notifications if "more than planned" in str(n.message)]


async def _samples_checked(pilot, telemetry, count: int) -> None:
    """Wait until the sampler has taken `count` more samples, each checked by the drift watch (an observer of
    the sampler's thread, whose alarm reaches the app before the next sample is taken)."""
    seen = len(telemetry.history())
    await wait_for(pilot, lambda: len(telemetry.history()) >= min(seen + count, telemetry.config.history))


async def test_a_gpu_using_more_than_planned_raises_the_alarm_once(shelf: Path) -> None:
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        telemetry = app.session.telemetry
        assert telemetry is not None
        await _samples_checked(pilot, telemetry, 3)  # samples as planned, checked: no alarm
        assert not _alarms(app) and app.session.drift is not None and app.session.drift.line == ""
        assert app.session.drift.alarms == {}

        # the device now holds 600 MiB more than the plan says it should (a pool growing, say)
        reader = telemetry.memory
        telemetry.memory = lambda: {name: (used + 600 * MiB, total) for name, (used, total) in reader().items()}
        await wait_for(pilot, lambda: bool(_alarms(app)))
        (line,) = _alarms(app)
        assert line.startswith("CUDA0 holds 600.0 MiB more than planned") and "likely" in line

        await pilot.press("f3")
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen))
        drift = app.screen.query_one("#dash-drift", Static)
        await wait_for(
            pilot, lambda: drift.display and "CUDA0 holds 600.0 MiB more than planned" in str(drift.render())
        )
        await _samples_checked(pilot, telemetry, 3)  # samples still over the plan, each checked
        assert len(_alarms(app)) == 1  # said once, not at every sample
