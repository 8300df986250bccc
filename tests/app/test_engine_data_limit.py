"""VRAMCHAT_ENGINE_DATA_LIMIT_MIB (tests only): every engine process caps its data at that many MiB, so
that a device whose memory is the process's own (lavapipe) runs out for real (tests/vulkan/test_vulkan_heap.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.engine.data_limit import ENV
from app.engine.process import EngineProcess
from planner.config import LoadConfig

pytestmark = [
    pytest.mark.llama,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA and /proc are Linux's"),
]


def _data_limit(pid: int) -> str:
    (line,) = [x for x in Path(f"/proc/{pid}/limits").read_text().splitlines() if x.startswith("Max data size")]
    return line.split()[3]  # the soft limit: bytes, or "unlimited"


def test_the_engine_process_caps_its_data_where_the_variable_says(
    zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "4096")
    engine = EngineProcess()
    try:
        engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512))
        assert engine.pid is not None and _data_limit(engine.pid) == str(4096 << 20)
    finally:
        engine.close()


def test_without_the_variable_the_engine_keeps_the_apps_limit(
    zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    monkeypatch.delenv(ENV, raising=False)
    engine = EngineProcess()
    try:
        engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512))
        assert engine.pid is not None and _data_limit(engine.pid) == (
            "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
        )
    finally:
        engine.close()
