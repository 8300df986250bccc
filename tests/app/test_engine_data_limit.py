"""VRAMCHAT_ENGINE_DATA_LIMIT_MIB (tests only): every engine process caps its data at that many MiB while
llama.cpp allocates a load's buffers, so that a device whose memory is the process's own (lavapipe) runs out
for real (tests/vulkan/test_vulkan_heap.py); a reply runs under the process's own limit."""

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


def test_the_cap_holds_inside_the_block_and_the_limit_is_put_back_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the engine process wraps around a load: read in this process, where the block runs, not from the
    parent's progress messages (those can arrive after a small load has finished and the limit is back)."""
    import os
    import resource

    from app.engine.data_limit import capped

    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    monkeypatch.setenv(ENV, "4096")
    with capped() as cap:
        inside = _data_limit(os.getpid())
    assert cap == 4096 << 20 and inside == str(4096 << 20)
    assert _data_limit(os.getpid()) == ("unlimited" if soft == resource.RLIM_INFINITY else str(soft))


def test_after_a_capped_load_the_engine_process_has_its_own_limit_for_the_reply(
    zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    monkeypatch.setenv(ENV, "4096")
    engine = EngineProcess()
    try:
        engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512))
        assert engine.pid is not None
        assert _data_limit(engine.pid) == ("unlimited" if soft == resource.RLIM_INFINITY else str(soft))
    finally:
        engine.close()


def test_a_load_past_the_cap_fails_in_words_and_the_engine_lives_on(
    zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KV cache of 2 GiB past a cap 64 MiB above what the engine holds: llama.cpp's allocation fails as on a
    full device, the load says so, and the same engine process loads a small context after."""
    from app.engine.types import EngineError

    big = zoo["llama-f16"]
    probe = EngineProcess()
    try:
        probe.load(big, LoadConfig(n_ctx=512))
        assert probe.pid is not None
        held = int(
            next(x for x in Path(f"/proc/{probe.pid}/status").read_text().splitlines() if "VmData" in x).split()[1]
        )
    finally:
        probe.close()
    monkeypatch.setenv(ENV, str(held // 1024 + 64))
    engine = EngineProcess()
    try:
        with pytest.raises(EngineError, match="could not create the context"):
            engine.load(big, LoadConfig(n_ctx=2_000_000))
        engine.load(big, LoadConfig(n_ctx=512))
        assert engine.loaded
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
