"""Servers that send too much, too slowly, or to two downloads at once, and a disk that refuses: each ends
in bounded time with a message in words, and nothing beyond the file's size is ever written (issue 36,
cases 4, 5, 9, 10 and the user agent of 12)."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.sources import resolve_source
from app.sources.download import Progress, download
from app.sources.errors import AlreadyDownloading, DownloadError, SourceError
from tests.remote.conftest import REPO, run_cli
from tests.support.hub_server import LocalHub
from tests.support.tiny import TinySpec, write_tiny_model

SMALL = "acme/small-GGUF"
SMALL_FILE = "small-Q8_0.gguf"
SMALL_MODEL = f"hf:{SMALL}:Q8_0"
BOUND = 10.0  # seconds any of these commands may take, with the limits lowered to 1 s


@pytest.fixture
def small(hub: LocalHub, tmp_path: Path) -> Path:
    """A tiny model in a repo of its own (a download of it takes a moment)."""
    model = write_tiny_model(tmp_path / SMALL_FILE, TinySpec("llama", name="Small"))
    hub.add_repo(SMALL, {SMALL_FILE: model})
    return model


@pytest.fixture
def short_limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from app.sources import deadline

    monkeypatch.setattr(deadline, "REQUEST_DEADLINE", 1.0)
    monkeypatch.setattr(deadline, "STALL_WINDOW", 1.0)
    yield


def _one_line_error(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[str, float]:
    """The command's one error line (no traceback, no 'please report') and how long it took."""
    start = time.monotonic()
    code, out, err = run_cli(capsys, *words)
    took = time.monotonic() - start
    lines = [line for line in err.splitlines() if line.startswith("vramchat: error: ")]
    assert code == 1 and len(lines) == 1, (out, err)
    assert "Traceback" not in err and "please report" not in err and "unexpected" not in err, err
    return lines[0], took


def _folder(models: Path, repo: str = SMALL) -> Path:
    return models.joinpath(*repo.split("/"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- 4: a server that sends past the file's size ------------------------------------------------------


@pytest.mark.parametrize("length", ["none", "surplus"])
def test_a_server_sending_past_the_published_size_never_grows_the_partial_beyond_it(
    hub: LocalHub, small: Path, tmp_path: Path, length: str
) -> None:
    source = resolve_source(SMALL_MODEL)
    size = small.stat().st_size
    hub.surplus, hub.length = 32 << 20, length  # 32 MiB of zeros after the file; no length, or one counting them
    models = tmp_path / "models"
    partial = _folder(models) / f".{SMALL_FILE}.partial"
    sizes: list[int] = []

    def watch(p: Progress) -> None:
        if partial.exists():
            sizes.append(partial.stat().st_size)

    with pytest.raises(DownloadError, match=r"(sent more than|announces \d[\d,]* bytes where).* the hub gives") as err:
        download(source, root=models, progress=watch)
    assert f"{size:,}" in str(err.value)
    assert max(sizes, default=0) <= size
    assert not partial.exists() or partial.stat().st_size <= size
    assert not (_folder(models) / SMALL_FILE).exists()
    hub.surplus = 0  # a server that behaves again: the download completes and verifies
    result = download(source, root=models)
    assert _sha256(result.model_path) == _sha256(small)


# -- 5: slow-loris servers -----------------------------------------------------------------------------


@pytest.mark.parametrize("body_only", [False, True], ids=["header-lines", "body"])
def test_a_slow_loris_server_cannot_hold_plan_url(
    hub: LocalHub, small: Path, short_limits: None, capsys: pytest.CaptureFixture[str], body_only: bool
) -> None:
    url = hub.add_file("slow.gguf", small)
    hub.trickle, hub.trickle_prefix, hub.trickle_body_only = 0.2, "/files/", body_only  # 4 bytes every 0.2 s
    line, took = _one_line_error(capsys, "--plan", url)
    assert took < BOUND, took
    assert f"{url}: the server answers too slowly: nothing whole within 1 s; try again later" in line


def test_a_slow_loris_hub_api_cannot_hold_plan(
    hub: LocalHub, small: Path, short_limits: None, capsys: pytest.CaptureFixture[str]
) -> None:
    hub.trickle, hub.trickle_prefix = 0.2, "/api/"
    line, took = _one_line_error(capsys, "--plan", SMALL_MODEL)
    assert took < BOUND, took
    assert "the server answers too slowly" in line and "never listed before" in line


@pytest.mark.parametrize("body_only", [False, True], ids=["header-lines", "body"])
def test_a_download_from_a_slow_loris_server_ends_in_words(
    hub: LocalHub,
    small: Path,
    short_limits: None,
    capsys: pytest.CaptureFixture[str],
    body_only: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.sources import deadline

    monkeypatch.setattr(deadline, "SMALL_BODY", 0)  # as a model file is: may take long while it keeps coming
    hub.trickle, hub.trickle_prefix, hub.trickle_body_only = 0.2, "/_cdn/", body_only
    line, took = _one_line_error(capsys, "--download", SMALL_MODEL)
    assert took < BOUND, took
    said = "stalled: under 16 KiB arrived in 1 s" if body_only else "answers too slowly: nothing whole within 1 s"
    assert f"{SMALL_FILE}: the server {said}" in line


def test_a_download_that_keeps_coming_is_not_stopped_by_the_deadline(
    hub: LocalHub, small: Path, short_limits: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.sources import deadline

    monkeypatch.setattr(deadline, "SMALL_BODY", 0)
    monkeypatch.setattr(deadline, "STALL_BYTES", 4096)
    hub.rate = max(small.stat().st_size // 2, 8192)  # two seconds: longer than the 1 s deadline
    result = download(resolve_source(SMALL_MODEL), root=tmp_path / "models")
    assert _sha256(result.model_path) == _sha256(small)


# -- 9: the disk refuses -------------------------------------------------------------------------------


def test_a_full_disk_mid_download_is_said_in_words_and_keeps_what_arrived(
    hub: LocalHub, gemma_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    import app.sources.download as downloads

    full_at = 40 << 20

    class FullDisk:
        def __init__(self, handle: object) -> None:
            self.handle, self.written = handle, 0

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()  # type: ignore[attr-defined]

        def __getattr__(self, name: str) -> object:
            return getattr(self.handle, name)

        def write(self, data: bytes) -> int:
            if self.written + len(data) > full_at:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.written += len(data)
            return self.handle.write(data)  # type: ignore[attr-defined,no-any-return]

    def opening(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        handle = builtins.open(path, mode, *args, **kwargs)  # type: ignore[call-overload]  # noqa: SIM115
        return FullDisk(handle) if mode == "r+b" else handle

    monkeypatch.setattr(downloads, "open", opening, raising=False)
    line, _ = _one_line_error(capsys, "--download", f"hf:{REPO}:Q4_K_M")
    folder = Path(os.environ["VRAMCHAT_HOME"]) / "data" / "models" / "acme" / "gemma-3-270m-GGUF"
    assert f"the disk holding {folder} is full" in line
    assert "free some space there, or set VRAMCHAT_HOME" in line and "kept, hidden, to resume" in line
    assert (folder / ".gemma-3-270m-Q4_K_M.gguf.partial").stat().st_size == full_at


def test_a_data_folder_that_cannot_be_written_is_said_in_words(
    hub: LocalHub, small: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("VRAMCHAT_HOME", str(blocker / "home"))  # its folders cannot be made (as root, chmod can't)
    line, _ = _one_line_error(capsys, "--download", SMALL_MODEL)
    assert f"{SMALL_MODEL.removesuffix(':Q8_0')}" in line and "cannot write" in line and "Not a directory" in line
    monkeypatch.setenv("VRAMCHAT_HOME", str(tmp_path / "home"))
    real_mkdir = Path.mkdir

    def read_only(self: Path, *args: object, **kwargs: object) -> None:
        if "models" in self.parts:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", read_only)
    line, _ = _one_line_error(capsys, "--download", SMALL_MODEL)
    assert "is on a read-only file system: make it writable, or set VRAMCHAT_HOME" in line


# -- 10: two downloads of one file at once -------------------------------------------------------------


def test_a_second_download_of_the_same_file_is_refused_and_the_first_completes(
    hub: LocalHub, gemma_path: Path, tmp_path: Path
) -> None:
    source = resolve_source(f"hf:{REPO}:Q4_K_M")
    models = tmp_path / "models"
    started = threading.Event()
    outcome: list[object] = []

    def first() -> None:
        try:
            outcome.append(download(source, root=models, with_projector=False, progress=lambda p: started.set()))
        except Exception as exc:  # pragma: no cover - said by the assertion below
            outcome.append(exc)

    hub.rate = 120 * 1024 * 1024  # about two seconds for the file
    worker = threading.Thread(target=first)
    worker.start()
    assert started.wait(30)
    with pytest.raises(AlreadyDownloading, match=rf"another vramchat \(pid {os.getpid()}\) is downloading this file"):
        download(source, root=models, with_projector=False)
    worker.join(60)
    assert not worker.is_alive() and len(outcome) == 1
    result = outcome[0]
    assert not isinstance(result, Exception), result
    assert _sha256(result.model_path) == _sha256(gemma_path)  # type: ignore[attr-defined]
    assert [p.name for p in result.model_path.parent.iterdir()] == [result.model_path.name]  # type: ignore[attr-defined]


# -- 12: the user agent --------------------------------------------------------------------------------


def test_every_request_names_vramchat_and_its_version(hub: LocalHub, small: Path, tmp_path: Path) -> None:
    from app import __version__

    download(resolve_source(SMALL_MODEL), root=tmp_path / "models")
    url = hub.add_file("plain.gguf", small)
    with pytest.raises(SourceError):  # a small file's header: read (or refused); the request is what counts
        download(resolve_source(url), root=tmp_path / "models", space=lambda _: 0)
    agents = {(e.path.split("/")[1], e.user_agent) for e in hub.requests()}
    assert {part for part, _ in agents} >= {"api", SMALL.split("/")[0], "_cdn", "files"}
    assert all(f"vramchat/{__version__}" in agent and "None" not in agent for _, agent in agents), agents
