"""Downloading a remote model (every shard, and its projector) into vramchat's models folder.

    result = download(source, progress=callback, cancel=event)

- Each file is written under a hidden name beside its destination (`.NAME.partial`, which no scan
  lists) and renamed only when whole and, for the hub, when its sha256 equals the one the hub
  publishes (hashed as it arrives: no second read).
- An interrupted download resumes from its partial file with a range request, in this run (a cut
  connection is tried again) or a later one; a partial of another version of the file starts over.
- The disk is checked first: a download that would not fit is refused before a byte is written,
  saying how much it needs and how much is free.
- `cancel` (a threading.Event) stops it between two chunks: the partial file stays hidden, to resume.
- A model already in the Hugging Face cache (downloaded by another tool, same content) is used where
  it is: no second copy.

huggingface_hub's own hf_hub_download does not resume across runs (its temporary file is unique to a
process and removed on failure) nor report progress to a caller other than through tqdm, so the bytes
are read here, through its HTTP session, headers and error mapping (app/sources/http.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.paths import models_dir
from app.sources.errors import (
    AlreadyDownloading,
    Cancelled,
    CannotWrite,
    ChecksumFailed,
    DownloadError,
    NoRoom,
    SourceError,
)
from app.sources.http import hub_client, hub_headers, translated, url_client
from app.sources.model import HUB, ModelSource, SourceFile
from app.sources.safe_paths import check_name, check_repo_id, inside

CHUNK = 1 << 20
RESUMES = 3  # a connection cut mid-file is resumed this many times in one run (more if bytes keep coming)
SPACE_MARGIN = 64 * 1024 * 1024  # left free beyond the download itself
PROGRESS_EVERY = 0.1  # seconds between two progress callbacks
_PROJECTOR_PREFERENCE = ("F16", "BF16", "Q8_0", "F32")


@dataclass(frozen=True)
class Progress:
    """Where a download stands: bytes of all its files, speed (bytes/s, over the last seconds), time left."""

    file: str  # the file being written
    done: int
    total: int
    speed: float
    seconds_left: float | None
    phase: str = "download"  # download, or done

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


@dataclass(frozen=True)
class Download:
    """What a download will write: each remote file and its destination, and the space it needs."""

    files: tuple[tuple[SourceFile, Path], ...]
    reused: tuple[Path, ...]  # files already present (the models folder, the Hugging Face cache)
    needed: int  # bytes still to download
    free: int  # bytes free where they go
    model_path: Path  # the first shard, where it will be
    projector_path: Path | None
    from_hf_cache: bool = False  # the model is the Hugging Face cache's copy (no second one is made)
    projector_to_hf_cache: SourceFile | None = None  # fetched by huggingface_hub into its cache, beside the model


@dataclass(frozen=True)
class DownloadResult:
    model_path: Path
    projector_path: Path | None
    downloaded: int  # bytes written by this run
    from_hf_cache: bool


def free_bytes(folder: Path) -> int:
    """Free space where `folder` is (its nearest existing parent)."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def destination_folder(source: ModelSource, root: Path | None = None) -> Path:
    """models/ORG/REPO for a hub repo, models/HOST for an URL (each checked: app/sources/safe_paths.py)."""
    root = root or models_dir()
    if source.kind == HUB and source.repo_id:
        return root.joinpath(*check_repo_id(source.repo_id, source.ref).split("/"))
    host = urllib.parse.urlsplit(source.files[0].url).hostname or "downloads"
    return root / check_name(host.replace(":", "_"), f"{source.ref}: the server's host name")


def _target(source: ModelSource, name: str, folder: Path, root: Path | None) -> Path:
    """`folder / name`, refused unless it and its hidden partial files stay in the models folder."""
    target = folder / check_name(name, source.ref)
    for path in (target, _partial(target), _partial_meta(target)):
        inside(root or models_dir(), path, source.ref)
    return target


def _name_in(source: ModelSource, file: SourceFile) -> str:
    """A file's path under the download's folder: its path in the repo (the hub), its name (an URL)."""
    return file.name if source.kind == HUB else file.file_name


def choose_projector(source: ModelSource) -> SourceFile | None:
    """The projector downloaded with the model: F16 if there is one (llama.cpp's usual), else the first."""
    if not source.projectors:
        return None
    for tag in _PROJECTOR_PREFERENCE:
        for p in source.projectors:
            if tag in p.file_name.upper().replace("-", "_").split("."):
                return p
            if p.file_name.upper().endswith(f"{tag}.GGUF"):
                return p
    return source.projectors[0]


def plan_download(source: ModelSource, root: Path | None = None, with_projector: bool = True) -> Download:
    """What `download` would write and whether it fits, before anything is written."""
    if not source.is_remote:
        raise DownloadError(f"{source.ref}: already on this machine")
    if source.problem:
        raise DownloadError(f"{source.ref}: {source.problem}")
    folder = destination_folder(source, root)
    model_folder = folder / os.path.dirname(source.files[0].name) if source.kind == HUB else folder
    todo: list[tuple[SourceFile, Path]] = []
    reused: list[Path] = []
    cached = _in_hf_cache(source)
    if cached:
        reused += cached
        model_path = cached[0]
    else:
        for file in source.files:
            todo.append((file, _target(source, _name_in(source, file), folder, root)))
        model_path = todo[0][1]
    projector = choose_projector(source) if with_projector else None
    projector_path = None
    to_hf_cache = None
    if projector is not None and cached:
        # the model stays in the Hugging Face cache: its projector goes there too (by the hub's own client,
        # into the same snapshot folder), where a scan finds it beside the model
        projector_path = _in_hf_cache_one(source, projector)
        to_hf_cache = projector if projector_path is None else None
    elif projector is not None:
        projector_path = _target(source, projector.file_name, model_folder, root)
        todo.append((projector, projector_path))
    needed = 0
    kept: list[tuple[SourceFile, Path]] = []
    for file, target in todo:
        if _complete(target, file):
            reused.append(target)
            continue
        kept.append((file, target))
        needed += file.size - _partial_size(target, file)
    if to_hf_cache is not None:
        needed += to_hf_cache.size
    return Download(
        tuple(kept), tuple(reused), needed, free_bytes(folder), model_path, projector_path, bool(cached), to_hf_cache
    )


def download(
    source: ModelSource,
    *,
    root: Path | None = None,
    with_projector: bool = True,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    space: Callable[[Path], int] | None = None,
) -> DownloadResult:
    """Download the model (and its projector) into the models folder; see the module's docstring.
    Blocking: run it in a worker thread; `progress` is called from that thread."""
    plan = plan_download(source, root, with_projector)
    free = space(destination_folder(source, root)) if space is not None else plan.free
    check_room(source, plan, free, root)
    total = sum(f.size for f, _ in plan.files)
    meter = _Meter(total, progress if plan.files else None)
    written = 0
    for file, target in plan.files:
        written += _fetch(source, file, target, meter, cancel)
    meter.finish()
    projector_path = plan.projector_path
    if plan.projector_to_hf_cache is not None:
        projector_path = _projector_into_hf_cache(source, plan.projector_to_hf_cache)
    return DownloadResult(plan.model_path, projector_path, written, plan.from_hf_cache)


def check_room(source: ModelSource, plan: Download, free: int | None = None, root: Path | None = None) -> None:
    """Raise NoRoom, saying how much is needed and how much is free, when the download would not fit."""
    free = plan.free if free is None else free
    if plan.needed + SPACE_MARGIN > free:
        from planner.hardware import format_size

        raise NoRoom(
            f"{source.ref}: the download needs {format_size(plan.needed)} "
            f"(and {format_size(SPACE_MARGIN)} to spare), {format_size(free)} is free in "
            f"{destination_folder(source, root)}"
        )


def format_duration(seconds: float) -> str:
    """Time left, as a person says it: 42 s, 3 min 05 s, 1 h 07 min."""
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def partial_bytes(source: ModelSource, root: Path | None = None) -> int:
    """Bytes a stopped download keeps in its hidden partial files: what a resume goes on from (0: it
    starts over, as after a failed checksum, whose partial file is removed)."""
    folder = destination_folder(source, root)
    return sum(
        _partial_size(_target(source, _name_in(source, file), folder, root), file)
        for file in (*source.files, *source.projectors)
    )


def discard_partial(source: ModelSource, root: Path | None = None) -> int:
    """Remove the hidden partial files of a download (cancelled for good); returns the bytes freed."""
    freed = 0
    folder = destination_folder(source, root)
    for file in (*source.files, *source.projectors):
        target = _target(source, _name_in(source, file), folder, root)
        for path in (_partial(target), _partial_meta(target)):
            with contextlib.suppress(OSError):
                freed += path.stat().st_size
                path.unlink()
    return freed


# -- one file ----------------------------------------------------------------------------------------


def _partial(target: Path) -> Path:
    return target.with_name(f".{target.name}.partial")


def _partial_meta(target: Path) -> Path:
    return target.with_name(f".{target.name}.partial.json")


def _complete(target: Path, file: SourceFile) -> bool:
    try:
        return target.stat().st_size == file.size
    except OSError:
        return False


def _partial_size(target: Path, file: SourceFile) -> int:
    """Bytes of a partial file of this same file (its identity recorded beside it), else 0."""
    try:
        meta = json.loads(_partial_meta(target).read_text())
        size = _partial(target).stat().st_size
    except (OSError, ValueError):
        return 0
    if meta.get("identity") != file.identity or meta.get("size") != file.size or size > file.size:
        return 0
    return size


class _Partial:
    """A file being downloaded: its hidden partial file, the bytes it holds, their running sha256."""

    def __init__(self, file: SourceFile, target: Path) -> None:
        self.file, self.path, self.meta = file, _partial(target), _partial_meta(target)
        self.size = _partial_size(target, file)
        self.digest = hashlib.sha256() if file.sha256 else None
        if self.size == 0:
            self.restart()
        elif self.digest is not None:
            with open(self.path, "rb") as handle:  # the bytes kept from before enter the checksum first
                while block := handle.read(8 * CHUNK):
                    self.digest.update(block)

    def discard(self) -> None:
        """Remove the partial file and its record (a later run starts over)."""
        self.path.unlink(missing_ok=True)
        self.meta.unlink(missing_ok=True)
        self.size = 0

    def restart(self) -> None:
        with open(self.path, "wb"):
            pass
        self.meta.write_text(json.dumps({"identity": self.file.identity, "size": self.file.size}))
        self.size = 0
        if self.digest is not None:
            self.digest = hashlib.sha256()


def _fetch(source: ModelSource, file: SourceFile, target: Path, meter: _Meter, cancel: threading.Event | None) -> int:
    """Download one file to its hidden partial name (one vramchat at a time), resuming, then check and
    rename it; bytes written. What the disk refuses is said in words (`_os_failure`)."""
    from app.sources.headers import shard_name

    what = shard_name(source, file)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _PartialLock(target, what):
            if _complete(target, file):  # another vramchat finished it while this one waited to start
                meter.begin(file.file_name, file.size)
                meter.end_file()
                return 0
            return _fetch_locked(source, file, target, meter, cancel, what)
    except OSError as exc:
        raise _os_failure(exc, what, target, file) from exc


def _fetch_locked(
    source: ModelSource, file: SourceFile, target: Path, meter: _Meter, cancel: threading.Event | None, what: str
) -> int:
    part = _Partial(file, target)
    meter.begin(file.file_name, part.size)
    written = tries = 0
    while part.size < file.size:
        before = part.size
        try:
            _stream(source, part, meter, cancel, what)
        except SourceError as exc:
            if isinstance(exc, Cancelled) or not _transient(exc.__context__) or tries >= RESUMES:
                raise
            tries = 0 if part.size > before else tries + 1  # bytes keep coming: keep resuming
            time.sleep(0.2 * tries)
            continue
        finally:
            written += max(part.size - before, 0)
        if part.size == before:
            raise DownloadError(f"{what}: the server stopped sending at byte {part.size:,} of {file.size:,}")
    meter.end_file()
    if part.size != file.size:
        raise DownloadError(f"{what}: {part.size:,} bytes arrived for a file of {file.size:,}")
    if part.digest is not None and part.digest.hexdigest() != file.sha256:
        part.discard()
        raise ChecksumFailed(
            f"{what}: the checksum failed: the file's sha256 is not the one the hub publishes, so the download "
            "was damaged; nothing of it is kept: download it again"
        )
    os.replace(part.path, target)
    part.meta.unlink(missing_ok=True)
    return written


def _transient(cause: BaseException | None) -> bool:
    """A cut or a timeout worth resuming from; a server over vramchat's limits (too slow) is not."""
    import httpx2

    from app.sources.deadline import is_over_limit

    if cause is None or is_over_limit(cause):
        return False
    return isinstance(cause, (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.TimeoutException))


def _stream(source: ModelSource, part: _Partial, meter: _Meter, cancel: threading.Event | None, what: str) -> None:
    """Append the file's bytes from `part.size` on to the partial file (a server that sends the whole
    file instead starts it over). Never more than the file's published size is written: a server that
    announces or sends more is refused, and what it sent removed."""
    import httpx2

    from app.sources.http import CONNECT_TIMEOUT, READ_TIMEOUT

    hub = source.kind == HUB
    client = hub_client() if hub else url_client()
    headers = {**(hub_headers() if hub else {}), "Accept-Encoding": "identity"}
    if part.size:
        headers["Range"] = f"bytes={part.size}-"
    timeout = httpx2.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)  # the hub's session has none of its own
    with translated(what, hub), client.stream("GET", part.file.url, headers=headers, timeout=timeout) as response:
        status = response.status_code
        if status == 200 and part.size:
            part.restart()
            meter.begin(part.file.file_name, 0)
        elif status == 206:
            from app.sources.http import content_range_start

            if content_range_start(response.headers.get("Content-Range", "")) != part.size:
                raise DownloadError(f"{what}: the server resumed at another byte than asked")
        elif status != 200:
            response.read()
            if hub:
                from huggingface_hub import hf_raise_for_status

                hf_raise_for_status(response)
            from app.sources.http import http_status_failure

            raise http_status_failure(status, what)
        size, left = part.file.size, part.file.size - part.size
        announced = response.headers.get("Content-Length", "")
        if announced.isdigit() and int(announced) > left:
            raise DownloadError(
                f"{what}: the server announces {int(announced):,} bytes where {left:,} are left of a file of "
                f"{size:,} (the size {_publisher(source)} gives): nothing written; run it again later, or "
                "tell whoever runs the server"
            )
        with open(part.path, "r+b") as handle:
            handle.seek(part.size)
            for chunk in response.iter_bytes(CHUNK):
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"{what}: cancelled; the part downloaded is kept, hidden, to resume")
                if len(chunk) > size - part.size:
                    handle.close()
                    part.discard()
                    raise DownloadError(
                        f"{what}: the server sent more than the file's {size:,} bytes (the size "
                        f"{_publisher(source)} gives): the download is removed; run it again later, or tell "
                        "whoever runs the server"
                    )
                handle.write(chunk)
                if part.digest is not None:
                    part.digest.update(chunk)
                part.size += len(chunk)
                meter.add(len(chunk))


def _publisher(source: ModelSource) -> str:
    return "the hub" if source.kind == HUB else "the server's first answer"


class _PartialLock:
    """One vramchat at a time writes a file: an flock on a hidden lock file beside its partial, holding
    the pid of the one that has it (for the message of one refused). Not waited for: the second says so."""

    def __init__(self, target: Path, what: str) -> None:
        self.path = target.with_name(f".{target.name}.partial.lock")
        self.what = what
        self.fd: int | None = None

    def __enter__(self) -> _PartialLock:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            return self
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode(errors="replace").strip()
                os.close(fd)
                who = f"another vramchat (pid {holder})" if holder.isdigit() else "another vramchat"
                raise AlreadyDownloading(
                    f"{self.what}: {who} is downloading this file now; wait for it to finish (the model is "
                    "then there), or stop it and run this again to resume"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a lock file its last holder removed as this one opened it
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()  # while still held: one that opened it meanwhile sees it gone, tries again
            os.close(self.fd)
            self.fd = None


def _os_failure(exc: OSError, what: str, target: Path, file: SourceFile) -> CannotWrite:
    """What the disk refused, where, and what to do."""
    import errno

    from planner.hardware import format_size

    folder = target.parent
    where = exc.filename or folder
    kept = "what arrived is kept, hidden, to resume"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return CannotWrite(
            f"{what}: the disk holding {folder} is full ({format_size(_free_or_zero(folder))} free, the file "
            f"needs {format_size(file.size)}): free some space there, or set VRAMCHAT_HOME to a folder on a "
            f"disk with room; {kept}"
        )
    if exc.errno == errno.EROFS:
        return CannotWrite(
            f"{what}: {where} is on a read-only file system: make it writable, or set VRAMCHAT_HOME to a "
            "folder vramchat can write"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return CannotWrite(
            f"{what}: vramchat may not write {where} (permission denied): give it write access, or set "
            "VRAMCHAT_HOME to a folder vramchat can write"
        )
    return CannotWrite(f"{what}: cannot write {where} ({exc.strerror or exc}): check that folder, then run it again")


def _free_or_zero(folder: Path) -> int:
    try:
        return free_bytes(folder)
    except OSError:
        return 0


def _in_hf_cache(source: ModelSource) -> list[Path]:
    """The model's files in the Hugging Face cache (another tool downloaded them), or []."""
    if source.kind != HUB or not source.repo_id:
        return []
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return []
    found = []
    for file in source.files:
        hit = None
        for revision in (source.revision, None):
            with contextlib.suppress(Exception):
                path = try_to_load_from_cache(source.repo_id, file.name, revision=revision)
                if isinstance(path, str) and _same_content(Path(path), file):
                    hit = Path(path)
                    break
        if hit is None:
            return []
        found.append(hit)
    return found


def _in_hf_cache_one(source: ModelSource, file: SourceFile) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    assert source.repo_id is not None
    with contextlib.suppress(Exception):
        hit = try_to_load_from_cache(source.repo_id, file.name, revision=source.revision)
        if isinstance(hit, str) and _same_content(Path(hit), file):
            return Path(hit)
    return None


def _projector_into_hf_cache(source: ModelSource, projector: SourceFile) -> Path:
    from huggingface_hub import hf_hub_download

    assert source.repo_id is not None
    with translated(f"{source.ref}: {projector.file_name}", hub=True):
        return Path(hf_hub_download(source.repo_id, projector.name, revision=source.revision))


def _same_content(path: Path, file: SourceFile) -> bool:
    """The cache names a blob by its ETag, which for an LFS file is its sha256: same name, same size, same file."""
    try:
        real = Path(os.path.realpath(path))
        if real.stat().st_size != file.size:
            return False
    except OSError:
        return False
    return file.sha256 is None or real.name == file.sha256


class _Meter:
    """Bytes done, speed over the last few seconds, time left; calls `progress` at most every 0.1 s."""

    def __init__(self, total: int, progress: Callable[[Progress], None] | None) -> None:
        self.total, self.progress = total, progress
        self.finished = 0  # bytes of the files done
        self.current = 0  # bytes of the file being written (kept from before included)
        self.file = ""
        self.samples: list[tuple[float, int]] = []
        self.last = 0.0

    @property
    def done(self) -> int:
        return self.finished + self.current

    def begin(self, file: str, already: int) -> None:
        self.file, self.current = file, already
        self.samples.clear()
        self._emit(force=True)

    def add(self, n: int) -> None:
        self.current += n
        self._emit()

    def end_file(self) -> None:
        self.finished += self.current
        self.current = 0

    def finish(self) -> None:
        if self.progress is not None:
            self.progress(Progress(self.file, self.done, self.total, self._speed(time.monotonic()), 0.0, "done"))

    def _speed(self, now: float) -> float:
        self.samples.append((now, self.done))
        while len(self.samples) > 2 and now - self.samples[0][0] > 3.0:
            self.samples.pop(0)
        t0, d0 = self.samples[0]
        return (self.done - d0) / (now - t0) if now > t0 else 0.0

    def _emit(self, force: bool = False) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if not force and now - self.last < PROGRESS_EVERY:
            return
        self.last = now
        speed = self._speed(now)
        left = (self.total - self.done) / speed if speed > 0 else None
        self.progress(Progress(self.file, self.done, self.total, speed, left))
