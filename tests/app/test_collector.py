"""The cycle collector is paused while a command starts (app.collector): a plan that prints and exits
never collects, and whoever called main() finds the collector as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main
from app.collector import paused


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection made while the test runs."""
    seen: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(count)
    try:
        yield seen
    finally:
        gc.callbacks.remove(count)


def test_a_first_plan_makes_no_collection_and_leaves_the_collector_on(
    gemma_path: Path, collections: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert gc.isenabled()
    gc.collect()
    before = len(collections)
    code = main(["--plan", str(gemma_path), "--json"])
    during = collections[before:]
    assert code == 0 and '"n_ctx"' in capsys.readouterr().out
    # thousands of graph nodes priced, and no walk of the heap but the young objects' one as main() returns
    # (the collector back on, it collects at the next allocation): 55 collections before the pause
    assert len(during) <= 1 and all(generation == 0 for generation in during)
    assert gc.isenabled()


def test_the_collector_is_as_it_was_after_the_pause(collections: list[int]) -> None:
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()
