"""The plan cache's save while another thread's save is still writing: the app's last save (at exit) returns
only once the cache is on disk, so that the next start finds every badge the last one showed."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from app.caches import plans
from app.caches.plans import ModelSummary, PlanCache


def _first_save_held(cache: PlanCache, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Thread, threading.Event]:
    """A save begun in a thread and held with its file written but not yet in place; set the event to let it
    go on. Returns once it is held."""
    writing, release = threading.Event(), threading.Event()
    real_replace = os.replace

    def held_replace(src, dst) -> None:
        if threading.current_thread().name == "first-save":
            writing.set()
            release.wait(timeout=30)
        real_replace(src, dst)

    monkeypatch.setattr(plans.os, "replace", held_replace)
    first = threading.Thread(target=cache.save, name="first-save")
    first.start()
    assert writing.wait(timeout=30)
    return first, release


def test_a_save_during_another_threads_write_returns_only_when_the_file_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "plans.json"
    cache = PlanCache(path)
    cache.put("model-a", "print", ModelSummary(name="A", checked=True))
    first, release = _first_save_held(cache, monkeypatch)
    second_done = threading.Event()
    second = threading.Thread(target=lambda: (cache.save(), second_done.set()), name="exit-save")
    second.start()
    # while the first write is held, the exit's save must not have returned (it returned at once before)
    assert not second_done.wait(timeout=0.5)
    release.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert second_done.is_set()
    found = PlanCache(path).get("model-a", "print")
    assert found is not None and found[0].checked and found[1]


def test_what_is_put_during_a_write_is_saved_by_the_next_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "plans.json"
    cache = PlanCache(path)
    cache.put("model-a", "print", ModelSummary(name="A"))
    first, release = _first_save_held(cache, monkeypatch)
    cache.put("model-b", "print", ModelSummary(name="B"))  # a row planned while the first save writes
    release.set()
    first.join(timeout=30)
    cache.save()
    again = PlanCache(path)
    assert again.get("model-a", "print") is not None and again.get("model-b", "print") is not None
