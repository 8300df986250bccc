"""Downloading from the hub: resumed after a cut, checked against the hub's sha256, refused when the disk
is full, cancelled with nothing half-written in the list; a model in the Hugging Face cache stays there."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.sources import resolve_source
from app.sources.download import Progress, discard_partial, download, plan_download
from app.sources.errors import Cancelled, DownloadError, NoRoom
from tests.remote.conftest import REPO, run_cli
from tests.support.hub_server import LocalHub

MODEL = f"hf:{REPO}:Q4_K_M"
FILE = "gemma-3-270m-Q4_K_M.gguf"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _listed(models: Path) -> list[str]:
    from app.discovery import Folder, scan

    return sorted(Path(m.path).name for m in scan([Folder(models, "vramchat")]))


def _cdn_gets(hub: LocalHub) -> list[str | None]:
    return [e.range for e in hub.requests("/_cdn/") if e.method == "GET"]


def _until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_download_cut_at_half_resumes_from_its_partial_file_and_is_checked(
    hub: LocalHub, gemma_path: Path, tmp_path: Path
) -> None:
    size = gemma_path.stat().st_size
    hub.drop_at = size // 2  # the connection is cut once, half-way
    seen: list[Progress] = []
    result = download(resolve_source(MODEL), root=tmp_path / "models", progress=seen.append)
    assert result.model_path == tmp_path / "models" / "acme" / "gemma-3-270m-GGUF" / FILE
    assert _sha256(result.model_path) == _sha256(gemma_path)
    gets = _cdn_gets(hub)
    resumed_at = int(str(gets[1]).removeprefix("bytes=").rstrip("-"))
    assert gets[0] is None and size // 2 - (4 << 20) <= resumed_at <= size // 2  # a range from the partial file
    assert result.projector_path is not None and result.projector_path.parent == result.model_path.parent
    assert _listed(tmp_path / "models") == [FILE]  # the model; its projector beside it, not as a model
    assert not [p for p in result.model_path.parent.iterdir() if p.name.startswith(".")]
    done = [p for p in seen if p.phase == "done"]
    assert done and done[-1].done == done[-1].total == size + result.projector_path.stat().st_size
    assert all(p.speed >= 0 for p in seen) and any(p.seconds_left is not None for p in seen)


def test_a_cancelled_download_leaves_nothing_in_the_list_and_resumes_later(
    hub: LocalHub, gemma_path: Path, tmp_path: Path
) -> None:
    source = resolve_source(MODEL)
    models = tmp_path / "models"
    cancel = threading.Event()

    def halfway(p: Progress) -> None:
        if p.fraction >= 0.5:
            cancel.set()

    hub.rate = 100 * 1024 * 1024  # in small steps: the cancel lands within a few percent of half-way
    with pytest.raises(Cancelled, match="kept, hidden, to resume"):
        download(source, root=models, progress=halfway, cancel=cancel, with_projector=False)
    assert _listed(models) == []  # the partial file is hidden
    left = plan_download(source, models, with_projector=False).needed
    assert 0 < left < gemma_path.stat().st_size * 0.55
    hub.rate = None
    _until(lambda: len(_cdn_gets(hub)) == 1)  # the server has seen the cancelled request end
    hub.clear_log()
    result = download(source, root=models, with_projector=False)
    assert _cdn_gets(hub) == [f"bytes={gemma_path.stat().st_size - left}-"]
    assert _sha256(result.model_path) == _sha256(gemma_path) and _listed(models) == [FILE]
    # cancelled for good: the partial file goes
    result.model_path.unlink()
    cancel.clear()
    hub.rate = 400 * 1024 * 1024
    with pytest.raises(Cancelled):
        download(source, root=models, progress=halfway, cancel=cancel, with_projector=False)
    assert discard_partial(source, models) > 0
    assert not list(result.model_path.parent.iterdir())


def test_a_download_that_would_not_fit_is_refused_before_it_starts(
    hub: LocalHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = resolve_source(MODEL)
    with pytest.raises(NoRoom, match=r"needs 241\.\d MiB .* 100\.0 MiB is free in"):
        download(source, root=tmp_path / "models", space=lambda folder: 100 * 1024 * 1024)
    assert _cdn_gets(hub) == []
    import app.sources.download as downloads

    monkeypatch.setattr(downloads, "free_bytes", lambda folder: 100 * 1024 * 1024)
    code, _, err = run_cli(capsys, "--download", MODEL)
    assert code == 1 and "vramchat: error:" in err and "100.0 MiB is free" in err and "Traceback" not in err


def test_a_download_whose_checksum_is_wrong_is_removed(hub: LocalHub, gemma_path: Path, tmp_path: Path) -> None:
    hub.add_repo("acme/damaged", {FILE: gemma_path}, wrong_sha256={FILE})
    models = tmp_path / "models"
    with pytest.raises(DownloadError, match="sha256 is not the one the hub publishes"):
        download(resolve_source("hf:acme/damaged:Q4_K_M"), root=models)
    assert not [p for p in models.rglob("*") if p.is_file()]


def test_a_model_in_the_hugging_face_cache_is_used_where_it_is(
    hub: LocalHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from huggingface_hub import hf_hub_download

    cached = Path(hf_hub_download(REPO, FILE))  # another tool downloaded it
    hub.clear_log()
    code, out, err = run_cli(capsys, "--download", MODEL)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{cached} (in the Hugging Face cache, where another tool put it: used there, not copied)"
    assert Path(lines[1]).parent == cached.parent and Path(lines[1]).name == "mmproj-F16.gguf"
    model_bytes = cached.stat().st_size
    assert hub.bytes_sent("/_cdn/") < model_bytes  # the projector only


def test_search_and_the_most_downloaded_chat_repos(hub: LocalHub, repo_files: dict[str, Path]) -> None:
    from app.sources.hub import popular_chat_repos, search_repos

    hub.add_repo("acme/qwen-GGUF", {"q-Q4_K_M.gguf": repo_files["gemma-3-270m-Q2_K.gguf"]}, downloads=5000)
    hub.add_repo(
        "acme/embed-GGUF", {"e-F16.gguf": repo_files["gemma-3-270m-Q2_K.gguf"]}, pipeline_tag="feature-extraction"
    )
    hub.add_repo("acme/safetensors-only", {}, tags=["transformers"])
    assert [r.repo_id for r in search_repos("gemma")] == [REPO]
    assert [r.repo_id for r in popular_chat_repos()] == ["acme/qwen-GGUF", REPO]
    assert popular_chat_repos(limit=1)[0].downloads == 5000


@pytest.mark.llama
def test_a_download_killed_mid_way_resumes_and_the_model_answers(
    hub: LocalHub, gemma_path: Path, tmp_path: Path
) -> None:
    env = dict(os.environ)
    vramchat = [sys.executable, "-m", "app"]
    size = gemma_path.stat().st_size
    hub.rate = 60 * 1024 * 1024  # about 4 s for the whole file
    proc = subprocess.Popen([*vramchat, "--download", MODEL], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    models = Path(env["VRAMCHAT_HOME"]) / "data" / "models" / "acme" / "gemma-3-270m-GGUF"
    partial = models / f".{FILE}.partial"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not partial.exists() or partial.stat().st_size < size // 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = partial.stat().st_size
    assert size // 3 < kept < size and not (models / FILE).exists()
    listed = subprocess.run([*vramchat, "--list"], env=env, capture_output=True, text=True)
    assert FILE not in listed.stdout  # nothing half-written in the list
    hub.rate = None
    hub.clear_log()
    again = subprocess.run([*vramchat, "--download", MODEL], env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == f"{models / FILE} (sha256 checked)"
    assert _cdn_gets(hub)[0] == f"bytes={kept}-"
    assert _sha256(models / FILE) == _sha256(gemma_path)
    answer = subprocess.run(
        [*vramchat, str(models / FILE), "-p", "What is the capital of France?", "--temp", "0", "-n", "24"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert answer.returncode == 0, answer.stderr
    assert "Paris" in answer.stdout
