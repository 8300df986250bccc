"""Parsed GGUF headers kept between runs, next to the plan cache.

Reading a header means walking every token string of the vocabulary (262,144 for the
demo): most of `--plan`'s own time. The parsed `ModelAnatomy` is kept, keyed by the
file (real path, size, modification time) and by the planner's code (its files' sizes
and times), so a changed model or a new vramchat reads the header again. A cache that
cannot be read or written is ignored: the header is read as usual.

The entries are pickles in vramchat's own cache folder, which only the user writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path

import planner
from app.paths import cache_dir
from planner.model import ModelAnatomy

FOLDER = "headers"
MAX_FILES = 500


@lru_cache(maxsize=1)
def _planner_stamp() -> str:
    """Changes whenever the planner's code does (a new release, an edited rule)."""
    root = Path(planner.__file__).parent
    parts = []
    for path in sorted(root.rglob("*.py")):
        with contextlib.suppress(OSError):
            st = path.stat()
            parts.append(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()


def _entry(path: str) -> Path | None:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    key = f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{_planner_stamp()}"
    return cache_dir() / FOLDER / (hashlib.sha1(key.encode()).hexdigest() + ".pickle")


def load_anatomy_cached(path: str) -> ModelAnatomy:
    """The model's anatomy: from the cache when this file was read before, else from its header."""
    from planner.anatomy import load_anatomy
    from planner.gguf import read_gguf

    entry = _entry(path)
    if entry is not None:
        with contextlib.suppress(Exception):  # missing, damaged, or from another Python: read again
            with entry.open("rb") as handle:
                anatomy = pickle.load(handle)
            if isinstance(anatomy, ModelAnatomy):
                return anatomy
    anatomy = load_anatomy(read_gguf(path))
    if entry is not None:
        _store(entry, anatomy)
    return anatomy


def _store(entry: Path, anatomy: ModelAnatomy) -> None:
    with contextlib.suppress(OSError, pickle.PicklingError, TypeError, AttributeError):
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(anatomy, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, entry)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _trim(entry.parent)


def _trim(folder: Path) -> None:
    files = sorted(folder.glob("*.pickle"), key=lambda p: p.stat().st_mtime)
    for old in files[:-MAX_FILES]:
        with contextlib.suppress(OSError):
            old.unlink()
