"""The models Ollama has pulled: found in its store (OLLAMA_MODELS, ~/.ollama/models), listed under
Ollama's names once a name (a blob shared by several names too), with the projector the manifest names,
planned and run by those names; manifests that are not Ollama's making are passed over without a word."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import ollama
from app.catalog import Catalog, table_rows
from app.cli import main
from app.discovery import Folder, known_cache_folders, scan
from app.ollama import OllamaName, find_model, projectors_of_blob, pulled_models
from app.vision import projectors_beside
from planner.hardware import GiB, Host
from tests.support.fake_gpus import simulated_gpus
from tests.support.ollama_store import MODEL, PROJECTOR, manifest_path, pull, put_blob, write_manifest
from tests.support.vision import write_picture, write_vision_pair

ROOT = Path(__file__).resolve().parents[2]
NAMES = {"gemma3:270m", "gemma3:latest", "someone/tiny:q8", "hf.co/org/Tiny-GGUF:Q4_0", "vision:tiny"}


def _blob_of(path: Path) -> str:
    return f"sha256-{hashlib.sha256(path.read_bytes()).hexdigest()}"


@pytest.fixture
def no_system_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Linux service's store of this machine, if it has one, stays out of the test."""
    monkeypatch.setattr(ollama, "SYSTEM_STORE", tmp_path / "no-system-store")


@pytest.fixture
def store(tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch, no_system_store: None) -> Path:
    """An Ollama models folder as `ollama pull` leaves it, named by OLLAMA_MODELS: one blob under two names
    of the library and under a user's namespace, another from a second registry, a vision model with its
    projector."""
    root = tmp_path / "ollama-models"
    pull(root, "gemma3:270m", zoo["llama-q8_0"])
    pull(root, "gemma3:latest", zoo["llama-q8_0"])
    pull(root, "someone/tiny:q8", zoo["llama-q8_0"])
    pull(root, "hf.co/org/Tiny-GGUF:Q4_0", zoo["qwen2-q4_0"])
    model, mmproj = write_vision_pair(tmp_path / "pair", "gemma3")
    pull(root, "vision:tiny", model, mmproj)
    monkeypatch.setenv("OLLAMA_MODELS", str(root))
    return root


def test_each_name_is_listed_once_with_its_blob_and_projector(store: Path, zoo: dict[str, Path]) -> None:
    models = scan([Folder(store, "Ollama")])
    by_name = {m.ollama_name: m for m in models}
    assert set(by_name) == NAMES and len(models) == len(NAMES)
    shared = store / "blobs" / _blob_of(zoo["llama-q8_0"])
    for name in ("gemma3:270m", "gemma3:latest", "someone/tiny:q8"):  # one blob, three names, three rows
        assert by_name[name].path == str(shared) and by_name[name].size == shared.stat().st_size
    assert len({m.entry_id for m in models}) == len(NAMES)  # each row its own key in a list
    assert by_name["gemma3:270m"].entry_id == str(manifest_path(store, "gemma3:270m"))
    assert all(m.source == "Ollama" and m.shards == [m.path] and not m.problem for m in models)
    (projector,) = by_name["vision:tiny"].projectors
    assert Path(projector).name == _blob_of(store.parent / "pair" / "mmproj-tiny-gemma3.gguf")
    assert [m.projectors for n, m in by_name.items() if n != "vision:tiny"] == [[]] * 4
    assert [m.ollama_name for m in models] == sorted(NAMES, key=str.lower)  # by name, not by hash


def test_the_store_is_where_ollama_keeps_it(
    tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    pull(home / ".ollama" / "models", "gemma3:270m", zoo["llama-f16"])
    moved = tmp_path / "moved"
    pull(moved, "other:1b", zoo["llama-f16"])
    service = tmp_path / "usr-share-ollama"
    pull(service, "served:1b", zoo["llama-f16"])
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(ollama, "SYSTEM_STORE", service)
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    linux = [service] if sys.platform.startswith("linux") else []
    assert ollama.stores() == [home / ".ollama" / "models", *linux]
    monkeypatch.setenv("OLLAMA_MODELS", str(moved))  # as Ollama reads it: that folder instead of ~/.ollama
    assert ollama.stores() == [moved, *linux]
    assert ("Ollama", moved) in {(f.source, f.path) for f in known_cache_folders()}
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    assert ollama.stores() == linux  # a folder without manifests and blobs is no store


@pytest.mark.parametrize(
    ("text", "full", "shown"),
    [
        ("gemma3", ("registry.ollama.ai", "library", "gemma3", "latest"), "gemma3:latest"),
        ("gemma3:270m", ("registry.ollama.ai", "library", "gemma3", "270m"), "gemma3:270m"),
        ("someone/tiny:q8", ("registry.ollama.ai", "someone", "tiny", "q8"), "someone/tiny:q8"),
        ("hf.co/org/Repo-GGUF:Q4_K_M", ("hf.co", "org", "Repo-GGUF", "Q4_K_M"), "hf.co/org/Repo-GGUF:Q4_K_M"),
        ("registry.ollama.ai/library/qwen3:8b", ("registry.ollama.ai", "library", "qwen3", "8b"), "qwen3:8b"),
        ("my.host:5000/team/model:v1", ("my.host:5000", "team", "model", "v1"), "my.host:5000/team/model:v1"),
    ],
)
def test_names_read_and_shown_as_ollama_does(text: str, full: tuple[str, str, str, str], shown: str) -> None:
    name = OllamaName.parse(text)
    assert name is not None and (name.host, name.namespace, name.model, name.tag) == full and str(name) == shown


@pytest.mark.parametrize(
    "text", ["", "a/b/c/d:e", "../x:1", "x:..", "evil\x1b]52;c;aGk=\x07:1", "sp ace:1", "x:" + "t" * 200]
)
def test_what_is_no_ollama_name(text: str) -> None:
    assert OllamaName.parse(text) is None


def test_the_catalog_plans_each_name_and_shows_it(store: Path) -> None:
    gpus, host = simulated_gpus([8 * GiB]), Host(32 * GiB, 30 * GiB)
    catalog = Catalog(gpus, host)
    entries = catalog.complete(catalog.scan([Folder(store, "Ollama")]))
    by_name = {e.name: e for e in entries}
    assert set(by_name) == NAMES
    assert all(e.summary and not e.summary.error and e.summary.verdict for e in entries)
    assert by_name["gemma3:270m"].summary.architecture == "llama"  # type: ignore[union-attr]
    names = [row[0] for row in table_rows(entries)]
    assert "vision:tiny [+ vision projector]" in names and "gemma3:270m" in names


def _list(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "app", "--list", *args], capture_output=True, cwd=ROOT, timeout=180, env=dict(os.environ)
    )


def test_list_shows_them_by_name(store: Path) -> None:
    proc = _list("--vram", "8GiB")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    for name in NAMES:
        assert any(line.startswith(name) for line in lines), (name, lines)
    data = json.loads(_list("--json").stdout)
    ours = {m["ollama_name"]: m for m in data["models"] if m["source"] == "Ollama"}
    assert set(ours) == NAMES and {"path": str(store), "source": "Ollama"} in data["folders"]
    assert ours["gemma3:270m"]["path"] == ours["gemma3:latest"]["path"]
    assert len(ours["vision:tiny"]["projectors"]) == 1 and ours["gemma3:270m"]["projectors"] == []


def test_plan_by_ollama_name(store: Path, zoo: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    blob = str(store / "blobs" / _blob_of(zoo["llama-q8_0"]))

    def planned(name: str) -> str:
        assert main(["--plan", name, "--json", "--vram", "8GiB"]) == 0
        return json.loads(capsys.readouterr().out)["model"]["path"]

    assert planned("gemma3:270m") == blob
    assert planned("gemma3") == blob  # its latest, as `ollama run gemma3`
    assert planned("GEMMA3:270M") == blob  # Ollama's names know no case
    # someone/tiny:q8 reads as a hub repository's quant too: the model on this machine comes first
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        assert planned("someone/tiny:q8") == blob
    finally:
        del os.environ["HF_HUB_OFFLINE"]
    assert main(["--plan", "nothere:1b"]) == 1
    assert "nothere:1b" in capsys.readouterr().err


def test_the_app_and_a_prompt_load_an_ollama_name_without_asking_the_hub(
    store: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.tui
    import app.tui.guard
    from app.tui.app import AppOptions

    seen: list[AppOptions] = []
    monkeypatch.setattr(app.tui.guard, "run_guarded", lambda run: run())
    monkeypatch.setattr(app.tui, "run", lambda options: seen.append(options) or 0)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # were the hub asked, this would fail
    assert main(["someone/tiny:q8"]) == 0
    assert seen[-1].model == str(store / "blobs" / _blob_of(zoo["llama-q8_0"]))


def test_the_projector_a_manifest_names_goes_with_its_blob(store: Path, tmp_path: Path) -> None:
    vision = find_model("vision:tiny")
    plain = find_model("gemma3:270m")
    assert vision is not None and plain is not None
    assert projectors_beside(vision.model) == list(vision.projectors) and len(vision.projectors) == 1
    assert projectors_beside(plain.model) == []  # the blobs folder holds other models' projectors: not its
    assert projectors_of_blob(str(tmp_path / "pair" / "tiny-gemma3.gguf")) is None  # not a blob: the folder's rule
    assert [Path(p).name for p in projectors_beside(str(tmp_path / "pair" / "tiny-gemma3.gguf"))] == [
        "mmproj-tiny-gemma3.gguf"
    ]


@pytest.mark.llama
def test_a_picture_answered_by_an_ollama_vision_model_by_name(store: Path, tmp_path: Path) -> None:
    picture = write_picture(tmp_path / "stripes.png", 64, 64)
    vramchat = str(Path(sys.executable).with_name("vramchat"))
    proc = subprocess.run(
        [vramchat, "vision:tiny", "-p", "What is in it?", "--image", str(picture), "--json", "-n", "4", "--temp", "0"],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["projector"]["path"] == find_model("vision:tiny").projectors[0]  # type: ignore[union-attr]
    assert data["images"][0]["tokens"] == 16


# -- manifests that are not Ollama's making ------------------------------------------------------


@pytest.fixture
def hostile(tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch, no_system_store: None) -> Path:
    """One good name among manifests that are broken, oversized, nested past any limit, or whose digests,
    blobs and names try to lead somewhere else."""
    root = tmp_path / "hostile"
    pull(root, "good:1b", zoo["llama-f16"])
    model = {"mediaType": MODEL, **put_blob(root, zoo["llama-f16"])}
    ok = {"schemaVersion": 2, "layers": [model]}
    write_manifest(root, "broken:json", b'{"layers": [')
    write_manifest(root, "binary:junk", os.urandom(4096))
    write_manifest(root, "not:dict", b"[]")
    write_manifest(root, "layers:notlist", {"layers": {"a": 1}})
    write_manifest(root, "layer:notdict", {"layers": ["sha256:" + "0" * 64]})
    write_manifest(root, "deep:nest", b"[" * 100_000 + b"]" * 100_000)
    write_manifest(root, "too:big", json.dumps(ok).encode() + b" " * ollama.MAX_MANIFEST_BYTES)
    write_manifest(root, "escape:digest", {"layers": [{"mediaType": MODEL, "digest": "sha256:../../../etc/passwd"}]})
    write_manifest(root, "upper:digest", {"layers": [{"mediaType": MODEL, "digest": "sha256:" + "A" * 64}]})
    write_manifest(root, "other:algo", {"layers": [{"mediaType": MODEL, "digest": "sha512:" + "0" * 128}]})
    (root / "blobs" / "sha256-not-a-hash").write_bytes(zoo["llama-f16"].read_bytes())  # a file no digest names
    write_manifest(root, "odd:digest", {"layers": [{"mediaType": MODEL, "digest": "sha256:not-a-hash"}]})
    write_manifest(root, "missing:blob", {"layers": [{"mediaType": MODEL, "digest": "sha256:" + "1" * 64}]})
    bad_projector = {"mediaType": PROJECTOR, "digest": "sha256:/etc/passwd"}
    write_manifest(root, "bad:projector", {"layers": [model, bad_projector]})
    outside = tmp_path / "outside.gguf"
    outside.write_bytes(zoo["llama-f16"].read_bytes()[:4096])
    os.symlink(outside, root / "blobs" / f"sha256-{'2' * 64}")  # a blob that leads out of the store
    write_manifest(root, "link:out", {"layers": [{"mediaType": MODEL, "digest": "sha256:" + "2" * 64}]})
    evil = root / "manifests" / "registry.ollama.ai" / "library" / "evil\x1b]52;c;aGk=\x07" / "latest"
    evil.parent.mkdir(parents=True)
    evil.write_text(json.dumps(ok))
    os.mkfifo(root / "manifests" / "registry.ollama.ai" / "library" / "good" / "fifo")  # reading it would hang
    elsewhere = tmp_path / "elsewhere"
    write_manifest(elsewhere, "linked:1b", ok)
    os.symlink(elsewhere / "manifests" / "registry.ollama.ai" / "library" / "linked", manifest_path(root, "x:y").parent)
    monkeypatch.setenv("OLLAMA_MODELS", str(root))
    return root


def test_only_what_ollama_would_write_is_listed(hostile: Path) -> None:
    assert [str(m.name) for m in pulled_models(hostile)] == ["good:1b"]
    assert [m.ollama_name for m in scan([Folder(hostile, "Ollama")])] == ["good:1b"]
    assert find_model("link:out") is None and find_model("bad:projector") is None


def test_list_over_hostile_manifests_writes_no_escape_and_no_traceback(hostile: Path) -> None:
    proc = _list()
    assert proc.returncode == 0, proc.stderr
    assert b"good:1b" in proc.stdout
    assert b"Traceback" not in proc.stderr and b"\x1b" not in proc.stdout + proc.stderr
    assert b"\x07" not in proc.stdout + proc.stderr
