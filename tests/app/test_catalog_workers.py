"""A long list of models is planned in worker processes (app.catalog_workers), beside the UI thread: the same
summaries the thread would make, every model once, a worker's death costing nothing but its share planned
again by the caller, and nothing left running when the scan is cancelled."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from app.caches.plans import ModelSummary, PlanCache
from app.catalog import Catalog, CatalogEntry, summarize
from app.catalog_workers import MODELS_PER_WORKER, WORKERS_SWITCH, summaries_in_workers, worker_count
from app.devices.simulated import parse_devices
from app.discovery import ModelFile
from planner.hardware import Host

HOST = Host(total=32 << 30, free=24 << 30)


class _KillsItsWorker(str):
    """A path whose unpickling ends the worker process at once, as a native crash would."""

    def __reduce__(self):  # type: ignore[override]
        return (os._exit, (9,))


def _workers() -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process().children()
        if "app.catalog_workers" in " ".join(child.cmdline()) and child.is_running()
    ]


@pytest.fixture
def shelf(zoo: dict[str, Path], tmp_path: Path) -> list[str]:
    """Every model of the zoo and a broken file."""
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    return [str(path) for path in zoo.values()] + [str(broken)]


def test_the_workers_plan_what_the_thread_plans(shelf: list[str]) -> None:
    gpus = parse_devices("8GiB/1GiB,backend=vulkan").devices()  # the devices travel to the workers whole
    answers: dict[int, ModelSummary | None] = {}
    seen_workers = 0
    for index, summary in summaries_in_workers(shelf, gpus, HOST, 2):
        if not answers:
            seen_workers = len(_workers())  # planned in two other processes, not this one
        assert index not in answers
        answers[index] = summary
    assert seen_workers == 2
    assert sorted(answers) == list(range(len(shelf)))
    for index, path in enumerate(shelf):
        got = answers[index]
        assert got is not None
        assert got.to_json() == summarize(path, gpus, HOST).to_json(), path
    last = answers[len(shelf) - 1]
    assert last is not None and last.error  # the broken file: its reason
    assert not _workers()


def test_a_worker_that_dies_leaves_its_models_to_the_caller(shelf: list[str]) -> None:
    paths: list[str] = list(shelf[:20])
    paths[1] = _KillsItsWorker(paths[1])  # the second worker's first path: it dies before it plans any
    answers = dict(summaries_in_workers(paths, [], HOST, 2))
    assert sorted(answers) == list(range(20))  # every model once
    assert all(answers[i] is not None for i in range(0, 20, 2))  # the first worker planned its share
    assert all(answers[i] is None for i in range(1, 20, 2))  # the second's comes back unplanned


def test_the_catalog_plans_again_what_a_dead_worker_left(
    shelf: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKERS_SWITCH, "2")
    catalog = Catalog([], HOST, PlanCache(tmp_path / "plans.json"))
    todo = [CatalogEntry(ModelFile(path, "test", os.path.getsize(path), 0, [path])) for path in shelf[:20]]
    doomed = todo[1].file
    todo[1] = CatalogEntry(ModelFile(_KillsItsWorker(doomed.path), "test", doomed.size, 0, [doomed.path]))
    planned = list(catalog.planned(todo))
    assert sorted(id(e) for e in planned) == sorted(id(e) for e in todo)  # each entry once
    assert all(e.fresh and e.summary is not None and not e.summary.error for e in planned)
    assert todo[1].summary is not None and todo[1].summary.n_layer > 0  # planned here instead


def test_closing_the_answers_ends_the_workers(shelf: list[str]) -> None:
    answers = summaries_in_workers(shelf * 4, [], HOST, 2)
    next(answers)
    workers = _workers()
    assert len(workers) == 2
    answers.close()  # the scan was cancelled
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    assert not _workers()


def test_how_many_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKERS_SWITCH, raising=False)
    assert worker_count(MODELS_PER_WORKER) == 0  # a short list: its workers' start would not be repaid
    cores = len(os.sched_getaffinity(0))
    expected = min(cores, 4, 100 // MODELS_PER_WORKER)
    assert worker_count(100) == (expected if expected >= 2 else 0)
    monkeypatch.setenv(WORKERS_SWITCH, "3")
    assert worker_count(100) == 3 and worker_count(2) == 2
    monkeypatch.setenv(WORKERS_SWITCH, "0")
    assert worker_count(100) == 0
