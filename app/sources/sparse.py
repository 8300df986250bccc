"""A remote model as local files that hold its headers and no weights (sparse: zeros, no disk space).

llama.cpp's dry run (app/engine/verify.py) opens a model file and prices its buffers without reading
the weights: a copy that holds the real headers at the real sizes is, to it, the model itself. The
copies live in vramchat's cache folder for the life of the process.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
from pathlib import Path

from app.paths import cache_dir
from app.sources.headers import identities, read_headers
from app.sources.model import ModelSource

_made: list[Path] = []


def sparse_copy(source: ModelSource) -> str:
    """The path of the first shard of the copy (every shard under its own name, as llama.cpp finds them)."""
    key = hashlib.sha1(repr((source.ref, identities(source), os.getpid())).encode()).hexdigest()[:16]
    folder = cache_dir() / "remote" / "sparse" / key
    folder.mkdir(parents=True, exist_ok=True)
    if not _made:
        atexit.register(_remove_all)
    _made.append(folder)
    headers = read_headers(source)
    paths = []
    for file, (_, data) in zip(source.files, headers):
        path = folder / file.file_name
        with open(path, "wb") as handle:
            handle.write(data)
            handle.truncate(file.size)
        paths.append(path)
    return str(paths[0])


def _remove_all() -> None:
    for folder in _made:
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)
