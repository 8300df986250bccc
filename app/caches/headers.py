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
from pathlib import Path

from app.caches.files import planner_stamp, write_atomically
from app.paths import cache_dir
from planner.model import ModelAnatomy

FOLDER = "headers"
MAX_FILES = 500


def _entry(path: str) -> Path | None:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    # the name as the file system holds it: a name that is not UTF-8 is a key like any other
    key = os.fsencode(real) + f"\0{st.st_size}\0{st.st_mtime_ns}\0{planner_stamp()}".encode()
    return cache_dir() / FOLDER / (hashlib.sha1(key).hexdigest() + ".pickle")


def load_anatomy_cached(path: str) -> ModelAnatomy:
    """The model's anatomy: from the cache when this file was read before, else from its header.
    (A model on the hub or at an URL is app.sources' to read: app.planning.read_anatomy.)"""
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
    with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError):
        write_atomically(entry, pickle.dumps(anatomy, protocol=pickle.HIGHEST_PROTOCOL), MAX_FILES)
