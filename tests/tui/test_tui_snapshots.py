"""Snapshots of the picker, the chat with its dashboard, and the dashboard screen.

Devices are simulated (VRAMCHAT_DEVICES), the models are tiny F16 models at a fixed
path, the engine is the fake one and the telemetry is fed fixed samples, so the
screens are the same on every machine. Update with `pytest --snapshot-update` and
look at the SVGs before committing them.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from app.settings import Settings
from app.telemetry import Telemetry
from planner.hardware import GiB, MiB
from tests.support.tiny import ZOO, write_tiny_model
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, reply_done, wait_for

SIZE = (160, 45)
DEVICES = "8GiB/1GiB,ram=32GiB/8GiB"


@pytest.fixture
def fixed_shelf(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMCHAT_DEVICES", DEVICES)
    # the chats list says when each chat was written to: one time in every run
    monkeypatch.setattr("app.tui.widgets.chat.past_chats.when", lambda moment, now=None: "09:30")
    root = Path(tempfile.gettempdir()) / "vramchat-snapshot-models"
    root.mkdir(exist_ok=True)
    for name in ("llama-f16", "qwen3-hd", "gemma2"):
        write_tiny_model(root / f"{name}.gguf", ZOO[name])  # always: tests/support/tiny may have changed
    return root


def fixed_telemetry(app, streaming: bool = False) -> Telemetry:
    """Telemetry fed 30 fixed samples half a second apart on a fixed clock: memory creeping up, a
    burst of tokens/s (`streaming`: still going at the last sample, as during a reply)."""
    session = app.session
    model = session.model
    assert session.telemetry is not None and model is not None
    session.telemetry.stop()
    step = {"i": 0}

    def memory() -> dict[str, tuple[int, int]]:
        i = step["i"]
        return {"CUDA0": (1 * GiB + 40 * MiB + i * MiB, 8 * GiB), "CPU": (8 * GiB + 300 * MiB + i * 2 * MiB, 32 * GiB)}

    def speed() -> tuple[float, bool]:
        i = step["i"]
        end = 29 if streaming else 26
        return (0.0, False) if i < 18 or i > end else (40.0 + i, True)

    class Cells:
        def kv_cells_used(self) -> int:
            return min(step["i"], 20) * 3

    m = model.report.measurements
    t = Telemetry(
        memory=memory,
        rss=lambda: 400 * MiB + step["i"] * MiB,
        engine=Cells(),
        kv_layout=model.plan.kv,
        kv_allocated=sum(m.kv.values()),
        compute=dict(m.compute),
        speed=speed,
    )
    for i in range(30):
        step["i"] = i
        t.sample_once()
    # on a fixed clock, so that the plots' time axis falls on the same pixels in every run
    pinned = [replace(s, t=1_000.0 + i * 0.5) for i, s in enumerate(t.history())]
    t._samples.clear()
    t._samples.extend(pinned)
    session.telemetry = t
    return t


async def load_and_chat(app, pilot, streaming: bool = False) -> None:
    from app.tui.widgets.chat_input import ChatInput

    await wait_for(pilot, picker_ready(app))
    await pilot.press("ctrl+l")
    await wait_for(pilot, model_loaded(app))
    box = app.screen.query_one(ChatInput)
    box.cursor_blink = False  # a blinking cursor would make the snapshot depend on timing
    box.load_text("What is the capital of France?")
    await pilot.press("enter")
    await pilot.pause(0.05)
    await wait_for(pilot, reply_done(app))
    fixed_telemetry(app, streaming)
    await dashboards_drawn(app, pilot)
    app.clear_notifications()
    await pilot.pause(0.1)


async def dashboards_drawn(app, pilot) -> None:
    """Wait until every dashboard on screen has drawn the fixed samples: the panel redraws on a
    2 Hz timer, which a busy machine runs late (a fixed pause once caught the plots half drawn)."""
    from app.tui.widgets.dashboard import Dashboard

    latest = app.session.telemetry.latest()

    def drawn() -> bool:
        shown = [d for d in app.screen.query(Dashboard) if d.display]
        return bool(shown) and all(d.has_drawn(latest) for d in shown)

    await wait_for(pilot, drawn)
    await pilot.pause(0.1)


def test_picker(snap_compare, fixed_shelf: Path) -> None:
    app = make_app(fixed_shelf, settings=Settings(scan_known_caches=False))

    async def ready(pilot) -> None:
        await wait_for(pilot, picker_ready(app))
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=SIZE, run_before=ready)


def test_chat_with_dashboard(snap_compare, fixed_shelf: Path) -> None:
    app = make_app(fixed_shelf, settings=Settings(scan_known_caches=False))

    async def chat(pilot) -> None:
        await load_and_chat(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=chat)


def test_dashboard_screen(snap_compare, fixed_shelf: Path) -> None:
    app = make_app(fixed_shelf, settings=Settings(scan_known_caches=False))

    async def dashboard(pilot) -> None:
        await load_and_chat(app, pilot)
        await pilot.press("f3")
        await dashboards_drawn(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=dashboard)


def test_chat_in_the_light_theme(snap_compare, fixed_shelf: Path) -> None:
    app = make_app(fixed_shelf, settings=Settings(scan_known_caches=False, theme="vramchat-light"))

    async def chat(pilot) -> None:
        await load_and_chat(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=chat)


def test_the_memory_panel_at_100_columns_during_a_reply(snap_compare, fixed_shelf: Path) -> None:
    """The panel at its narrowest (46 columns beside the chat): runway, maps and plots, nothing cut."""
    app = make_app(fixed_shelf, settings=Settings(scan_known_caches=False))

    async def chat(pilot) -> None:
        await load_and_chat(app, pilot, streaming=True)

    assert snap_compare(app, terminal_size=(100, 40), run_before=chat)


def test_the_full_dashboard_at_200_columns_during_a_reply(snap_compare, fixed_shelf: Path) -> None:
    app = make_app(fixed_shelf, settings=Settings(scan_known_caches=False))

    async def dashboard(pilot) -> None:
        await load_and_chat(app, pilot, streaming=True)
        await pilot.press("f3")
        await dashboards_drawn(app, pilot)

    assert snap_compare(app, terminal_size=(200, 50), run_before=dashboard)
