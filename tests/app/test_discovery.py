"""Finding models: folders, split models, vision projectors, symlinked caches, the plan cache."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from app.caches.plans import ModelSummary, PlanCache, device_fingerprint
from app.catalog import Catalog, fit_badge, format_params, table_rows
from app.discovery import Folder, folders_to_scan, known_cache_folders, scan
from planner.hardware import GiB, Host
from tests.support.fake_gpus import simulated_gpus
from tests.support.tiny import ZOO, write_tiny_model


@pytest.fixture
def shelf(tmp_path: Path, zoo: dict[str, Path]) -> Path:
    """A folder with a plain model, a split model (shards copied), a projector and junk."""
    root = tmp_path / "shelf"
    (root / "vision").mkdir(parents=True)
    shutil.copy(zoo["llama-f16"], root / "llama.gguf")
    shutil.copy(zoo["qwen2-q4_0"], root / "vision" / "qwen.gguf")
    (root / "vision" / "mmproj-qwen-f16.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    for i in (1, 2):
        (root / f"big-{i:05d}-of-00003.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    (root / "notes.txt").write_text("not a model")
    (root / ".hidden").mkdir()
    shutil.copy(zoo["phi3"], root / ".hidden" / "skip.gguf")
    return root


def test_scan_groups_shards_and_projectors(shelf: Path) -> None:
    models = scan([Folder(shelf, "--models-dir")])
    by_name = {m.file_name: m for m in models}
    assert set(by_name) == {"llama.gguf", "qwen.gguf", "big-00001-of-00003.gguf"}
    big = by_name["big-00001-of-00003.gguf"]
    assert len(big.shards) == 3 and [Path(p).name for p in big.missing_shards] == ["big-00003-of-00003.gguf"]
    assert "1 of 3 shards missing" in big.problem
    assert [Path(p).name for p in by_name["qwen.gguf"].projectors] == ["mmproj-qwen-f16.gguf"]
    assert by_name["llama.gguf"].projectors == []


def test_symlinked_duplicates_are_listed_once(tmp_path: Path, zoo: dict[str, Path]) -> None:
    """The Hugging Face hub cache links snapshot files to blobs."""
    hub = tmp_path / "hub" / "models--org--tiny"
    (hub / "blobs").mkdir(parents=True)
    (hub / "snapshots" / "abc").mkdir(parents=True)
    shutil.copy(zoo["llama-f16"], hub / "blobs" / "sha256-deadbeef")
    os.symlink(hub / "blobs" / "sha256-deadbeef", hub / "snapshots" / "abc" / "tiny.gguf")
    other = tmp_path / "other"
    other.mkdir()
    os.symlink(hub / "snapshots" / "abc" / "tiny.gguf", other / "same.gguf")
    models = scan([Folder(tmp_path / "hub", "Hugging Face"), Folder(other, "settings")])
    assert len(models) == 1 and models[0].source == "Hugging Face"


def test_known_caches_follow_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "llama"))
    for folder in (tmp_path / ".lmstudio" / "models", tmp_path / "hf" / "hub", tmp_path / "llama"):
        folder.mkdir(parents=True)
    found = {(f.source, f.path) for f in known_cache_folders()}
    assert found == {
        ("LM Studio", tmp_path / ".lmstudio" / "models"),
        ("Hugging Face", tmp_path / "hf" / "hub"),
        ("llama.cpp", tmp_path / "llama"),
    }
    folders = folders_to_scan([str(tmp_path / "llama")], [], known_caches=True)
    assert [f.source for f in folders].count("llama.cpp") == 0  # given on the command line first: listed once
    assert folders[0].source == "vramchat"


def test_catalog_plans_and_caches(shelf: Path) -> None:
    host = Host(32 * GiB, 30 * GiB)
    gpus = simulated_gpus([8 * GiB])
    catalog = Catalog(gpus, host, PlanCache())
    entries = catalog.complete(catalog.scan([Folder(shelf, "--models-dir")]))
    by_name = {e.file.file_name: e for e in entries}
    llama = by_name["llama.gguf"].summary
    assert llama is not None and llama.verdict == "full_gpu" and llama.architecture == "llama"
    assert fit_badge(llama) == (f"full GPU · {llama.n_ctx:,} tok", "full")
    assert by_name["big-00001-of-00003.gguf"].summary.error  # type: ignore[union-attr]

    # second start: every summary comes from the cache, fresh
    again = Catalog(gpus, host, PlanCache())
    cached = again.scan([Folder(shelf, "--models-dir")])
    assert all(e.fresh for e in cached)
    assert {e.file.file_name: e.summary for e in cached}["llama.gguf"] == llama

    # free memory changed: the cached badge is shown, marked stale, and re-planned
    moved = Catalog(simulated_gpus([4 * GiB]), host, PlanCache())
    stale = {e.file.file_name: e for e in moved.scan([Folder(shelf, "--models-dir")])}
    assert not stale["llama.gguf"].fresh and stale["llama.gguf"].summary == llama

    # a changed file is planned again
    write_tiny_model(shelf / "llama.gguf", ZOO["llama-f16"].with_(n_layer=2))
    changed = {e.file.file_name: e for e in Catalog(gpus, host, PlanCache()).scan([Folder(shelf, "x")])}
    assert changed["llama.gguf"].summary is None


def test_badges_and_rows() -> None:
    assert fit_badge(None) == ("planning…", "pending")
    assert fit_badge(ModelSummary(error="bad"))[1] == "error"
    assert fit_badge(ModelSummary(verdict="partial_gpu", layers_on_gpu=10, n_layer=32)) == (
        "partial · 10/33 layers",
        "partial",
    )
    assert fit_badge(ModelSummary(verdict="no_fit"))[0] == "won't fit"
    assert fit_badge(ModelSummary(verdict="cpu_only", n_ctx=4096))[0] == "CPU only · 4,096 tok"
    assert format_params(268_098_176) == "268M" and format_params(7_241_732_096) == "7.2B"
    assert table_rows([]) == []


def test_fingerprint_ignores_small_changes() -> None:
    host = Host(32 * GiB, 30 * GiB)
    a = device_fingerprint(simulated_gpus([8 * GiB]), host)
    b = device_fingerprint(simulated_gpus([8 * GiB]), Host(32 * GiB, 30 * GiB + 1000))
    c = device_fingerprint(simulated_gpus([12 * GiB]), host)
    assert a == b != c


def test_plan_cache_survives_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "plans.json"
    path.write_text("{broken")
    cache = PlanCache(path)
    assert cache.load_error and cache.get("k", "f") is None
    cache.put("k", "f", ModelSummary(name="x"))
    cache.save()
    assert PlanCache(path).get("k", "f") == (ModelSummary(name="x"), True)


# -- what is not a regular file, and names that are not UTF-8 (issue 36) ---------------------------


def _release(fifo: Path) -> None:
    """Let a reader blocked on the FIFO's open go (so a failing test cannot hang the session)."""
    with contextlib.suppress(OSError):  # no reader is waiting
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


@pytest.fixture
def fifo_shelf(tmp_path: Path, zoo: dict[str, Path]):
    """A real model beside a FIFO named like one and a link to that FIFO."""
    root = tmp_path / "fifo-shelf"
    root.mkdir()
    shutil.copy(zoo["llama-f16"], root / "real.gguf")
    os.mkfifo(root / "x.gguf")
    (root / "link-to-fifo.gguf").symlink_to(root / "x.gguf")
    yield root
    _release(root / "x.gguf")


def test_a_fifo_named_gguf_is_not_listed(fifo_shelf: Path) -> None:
    models = scan([Folder(fifo_shelf, "test")])
    assert [m.file_name for m in models] == ["real.gguf"]


def test_list_ends_promptly_beside_a_fifo(fifo_shelf: Path, _private_home: Path) -> None:
    """`--list` once waited forever to read a FIFO's header: now it lists the real model at once."""
    import subprocess
    import sys

    env = dict(os.environ, VRAMCHAT_DEVICES="8GiB,ram=32GiB", PYTHONPATH=str(Path(__file__).parents[2]))
    proc = subprocess.run(
        [sys.executable, "-m", "app", "--list", "--models-dir", str(fifo_shelf)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "real.gguf" in proc.stdout and "full GPU" in proc.stdout
    assert "x.gguf" not in proc.stdout and "link-to-fifo" not in proc.stdout
    assert "please report" not in proc.stderr
