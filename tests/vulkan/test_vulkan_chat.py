"""The chat on a GPU backend, as a user sees it in a terminal: the demo loaded on Vulkan0 answers, the memory
map shows what sits on the device, and the device's plot shows what llama.cpp allocated there (the driver gives
no live figure on lavapipe) beside the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.pty_app import PtyApp, until


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMCHAT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def test_a_chat_on_vulkan0_answers_and_shows_the_device(home: Path) -> None:
    app = PtyApp("demo")
    try:
        until(lambda: app.shown("loaded in"), 180, "the demo to load on Vulkan0", app=app)
        until(lambda: app.shown("Vulkan0 ·"), 60, "the memory map's Vulkan0", app=app)
        # the device's share of the weights: the tied embedding stays on the CPU
        until(lambda: app.shown("weights 65.2 MiB"), 60, "the device's weights", app=app)
        app.type("What is the capital of France?\r")
        until(lambda: app.shown("Paris"), 300, "the answer", app=app)
        until(lambda: app.shown("Vulkan0 memory"), 60, "the device's plot", app=app)
        until(lambda: app.shown("allocated"), 60, "what llama.cpp allocated on the device", app=app)
        app.type("\x11")  # Ctrl+Q
        until(lambda: app.proc.poll() is not None, 30, "the app to end", app=app)
        assert app.proc.returncode == 0
    finally:
        if app.proc.poll() is None:
            app.kill()
