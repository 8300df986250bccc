"""The chat on a GPU backend, as a user sees it in a terminal: the demo loaded on Vulkan0 answers, the memory
map shows what sits on the device, and the device's plot shows what llama.cpp allocated there (the driver gives
no live figure on lavapipe) beside the plan; the drift alarm says what it watches there, and the chat's plan
receipt keeps Vulkan0's buffers as allocated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.engine.llama_log import LOG_ROUNDING
from tests.support.pty_app import PtyApp, until


@pytest.fixture
def home(_private_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's own home (tests/conftest.py: this machine's speed figures in it), offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return _private_home


def _receipt() -> dict[str, Any] | None:
    from app.store import Store

    store = Store()
    try:
        chats = store.conversations()
        receipts = store.receipts(chats[0].id) if chats else []
        return receipts[0].body if receipts else None
    finally:
        store.close()


def test_a_chat_on_vulkan0_answers_and_shows_the_device(home: Path) -> None:
    app = PtyApp("demo")
    try:
        until(lambda: app.shown("loaded in"), 180, "the demo to load on Vulkan0", app=app)
        # lavapipe reports no free memory: the drift alarm says what it compares there, and what it cannot see
        until(lambda: app.shown("Vulkan0 reports no free memory"), 60, "the drift alarm's note", app=app)
        until(lambda: app.shown("Vulkan0 ·"), 60, "the memory map's Vulkan0", app=app)
        # the device's share of the weights: the tied embedding stays on the CPU
        until(lambda: app.shown("weights 65.2 MiB"), 60, "the device's weights", app=app)
        app.type("What is the capital of France?\r")
        until(lambda: app.shown("Paris"), 300, "the answer", app=app)
        until(lambda: app.shown("Vulkan0 memory"), 60, "the device's plot", app=app)
        until(lambda: app.shown("allocated"), 60, "what llama.cpp allocated on the device", app=app)
        receipt = until(_receipt, 60, "the chat's plan receipt", app=app)
        (device,) = [d for d in receipt["plan"]["devices"] if d["name"] == "Vulkan0"]
        on_device = {b["kind"]: b["bytes"] for b in receipt["allocated"] if b["name"] == "Vulkan0"}
        # the weights as planned (llama.cpp's log gives each buffer to 0.01 MiB); the context committed at the load
        # (4,096 tokens) holds less KV than the plan's maximum; the logits are in the pinned host buffer
        assert abs(on_device["weights"] - device["weights"]) <= LOG_ROUNDING
        assert 0 < on_device.get("kv", 0) + on_device.get("kv_swa", 0) <= device["kv"] and on_device["compute"] > 0
        assert any(b["name"] == "Vulkan_Host" and b["kind"] == "compute" for b in receipt["allocated"])
        # the device's peak is what llama.cpp allocated there: the telemetry reads no other figure on lavapipe
        assert receipt["peaks"]["devices"]["Vulkan0"]["used"] == sum(on_device.values())
        app.type("\x11")  # Ctrl+Q
        until(lambda: app.proc.poll() is not None, 30, "the app to end", app=app)
        assert app.proc.returncode == 0
    finally:
        if app.proc.poll() is None:
            app.kill()
