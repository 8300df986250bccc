"""Hostile headers: mutated real GGUF headers end in a plan or one clear error, never a crash; read
from the file, and over HTTP by range requests (the remote reader keeps every check)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import VramchatError
from tests.support.fuzzing import header_length, mutate, run_case
from tests.support.remote_reader import READERS
from tests.support.tiny import ZOO, write_tiny_model

SEEDS = ("llama-f16", "gemma3", "qwen3moe", "deepseek2", "mamba2", "lfm2", "gpt-oss")


@pytest.fixture(scope="module")
def seed_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, int]]:
    folder = tmp_path_factory.mktemp("fuzz-seeds")
    out = {}
    for name in SEEDS:
        data = write_tiny_model(folder / f"{name}.gguf", ZOO[name]).read_bytes()
        out[name] = (data, header_length(data))
    for _, read in READERS.values():  # the readers' modules imported before any is measured (3 MB of code)
        read(str(folder / f"{SEEDS[0]}.gguf"))
    return out


@pytest.mark.parametrize("reader", sorted(READERS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(SEEDS), seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 3))
def test_mutated_headers_plan_or_fail_cleanly(
    seed_files, tmp_path: Path, reader: str, name: str, seed: int, rounds: int
) -> None:
    data, header_end = seed_files[name]
    rng = random.Random(seed)
    how = []
    for _ in range(rounds):
        data, what = mutate(data, rng, header_end)
        how.append(what)
    path = tmp_path / f"mutated-{seed}.gguf"
    path.write_bytes(data)
    outcome = run_case(str(path), read=_read_reporting(READERS[reader][1]))
    assert outcome.kind in ("plan", "error"), (how, outcome.detail)
    if outcome.kind == "error":
        assert path.name in outcome.detail and "\n" not in outcome.detail
    # reading a header never allocates far beyond the header itself
    assert outcome.peak_bytes < max(4 * 1024 * 1024, 64 * header_end), (how, outcome.peak_bytes)
    assert outcome.seconds < 10, how  # a hang guard, not a speed target


def _read_reporting(read):  # type: ignore[no-untyped-def]
    """`read`, with the app's one-line errors (an empty file over HTTP) counted as errors, not crashes."""
    from planner.errors import GGUFError

    def wrapped(path: str):  # type: ignore[no-untyped-def]
        try:
            return read(path)
        except VramchatError as exc:
            raise GGUFError(path, str(exc)) from None

    return wrapped
