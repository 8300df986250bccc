"""Compute-buffer sizes kept between runs: a plan priced before is read back, never mixed up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import planner.compute
from app.caches.compute import FOLDER, DiskSizeStore
from app.caches.headers import load_anatomy_cached
from app.paths import cache_dir
from planner import compute_memo
from planner.config import LoadConfig
from planner.hardware import Host
from planner.memory import plan_memory

GiB = 1 << 30
HOST = Host(64 * GiB, 48 * GiB)


@pytest.fixture
def store() -> Iterator[None]:
    compute_memo.use_store(DiskSizeStore())
    yield
    compute_memo.use_store(None)


def _compute(path: Path, **config: int | str | bool) -> dict[str, int]:
    plan = plan_memory(load_anatomy_cached(str(path)), LoadConfig(**config), [], HOST)
    return {b.name: b.bytes for b in plan.buffers if b.kind == "compute"}


def _no_pricing(monkeypatch: pytest.MonkeyPatch) -> None:
    def priced(*_args, **_kwargs):
        raise AssertionError("the compute buffers were priced again")

    monkeypatch.setattr(planner.compute, "compute_buffers", priced)


def test_a_second_run_reads_the_sizes_back(zoo: dict[str, Path], store: None, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = _compute(zoo["llama-f16"], n_ctx=1024)
    assert fresh and list((cache_dir() / FOLDER).glob("*.json"))
    compute_memo.use_store(DiskSizeStore())  # a new process: nothing in memory, the files on disk
    _no_pricing(monkeypatch)
    assert _compute(zoo["llama-f16"], n_ctx=1024) == fresh


def test_what_changes_the_graph_changes_the_key(zoo: dict[str, Path], store: None) -> None:
    base = _compute(zoo["llama-f16"], n_ctx=1024)
    compute_memo.use_store(None)
    for change in (
        {"n_ctx": 4096},
        {"n_ubatch": 128, "n_batch": 128},
        {"flash_attn": True},
        {"type_k": "q8_0", "flash_attn": True},
    ):
        expected = _compute(zoo["llama-f16"], **{"n_ctx": 1024, **change})
        compute_memo.use_store(DiskSizeStore())
        assert _compute(zoo["llama-f16"], **{"n_ctx": 1024, **change}) == expected != base, change
        compute_memo.use_store(None)
    # another model of another shape, at the same configuration, is priced for itself
    other = _compute(zoo["qwen2-q4_0"], n_ctx=1024)
    compute_memo.use_store(DiskSizeStore())
    assert _compute(zoo["qwen2-q4_0"], n_ctx=1024) == other


def test_a_damaged_entry_is_priced_again(zoo: dict[str, Path], store: None) -> None:
    fresh = _compute(zoo["llama-f16"], n_ctx=1024)
    for entry in (cache_dir() / FOLDER).glob("*.json"):
        entry.write_text("{not json")
    compute_memo.use_store(DiskSizeStore())
    assert _compute(zoo["llama-f16"], n_ctx=1024) == fresh


def test_without_a_store_nothing_is_kept(zoo: dict[str, Path]) -> None:
    _compute(zoo["llama-f16"], n_ctx=1024)
    assert not (cache_dir() / FOLDER).exists()
