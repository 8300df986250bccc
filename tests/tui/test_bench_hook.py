"""bench/startup.py's marks (app/tui/bench_hook.py): "listed" is stamped as the first frame that shows the list
is handed to the terminal, not after the work queued behind that frame; "planned" once every badge is fresh,
and the app then quits by itself."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from textual.app import App
from textual.screen import Screen
from textual.widgets import DataTable

from app.tui.bench_hook import BENCH_ENV, FRAME
from app.tui.screens.picker import PickerScreen
from tests.support.tui_helpers import make_app


async def test_listed_is_stamped_at_the_first_frame_that_shows_the_list(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert hasattr(App, FRAME), "Textual renamed the step that hands a frame to the terminal"
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    marks = tmp_path / "marks.txt"
    monkeypatch.setenv(BENCH_ENV, str(marks))
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    for name in list(zoo)[:3]:
        shutil.copy(zoo[name], shelf / f"{name}.gguf")
    frames: list[tuple[float, int]] = []  # when each picker frame was handed over, and the rows it had
    display = getattr(App, FRAME)

    def seen(app: App, screen: Screen, renderable: object) -> None:
        display(app, screen, renderable)
        if isinstance(screen, PickerScreen):
            frames.append((time.time(), screen.query_one("#models", DataTable).row_count))

    monkeypatch.setattr(App, FRAME, seen)
    app = make_app(shelf)
    async with app.run_test(size=(160, 45)) as pilot:
        for _ in range(600):  # the app quits by itself after "planned"
            if not app.is_running:
                break
            await pilot.pause(0.05)
    stamps = dict(line.split() for line in marks.read_text().splitlines())
    listed, planned = float(stamps["listed"]), float(stamps["planned"])
    assert listed <= planned
    first_with_rows = next(i for i, (_, rows) in enumerate(frames) if rows == 3)
    before_the_mark = [f for f in frames if f[0] <= listed]
    assert len(before_the_mark) == first_with_rows + 1, (frames, listed)  # that frame, and none after it
