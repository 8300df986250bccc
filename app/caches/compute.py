"""Compute-buffer sizes kept between runs, beside the parsed headers.

The planner prices a configuration's compute buffers by replaying llama.cpp's graph through
ggml's allocator; the answer never depends on free memory, so a second `--plan` of the same
model, or the picker planning it again after memory changed, reads it back instead
(`planner.compute_memo`). Entries are keyed by the planner's code too: an edited rule or a new
vramchat prices again.
"""

from __future__ import annotations

import contextlib
import json
import threading

from app.caches.files import planner_stamp, write_atomically
from app.paths import cache_dir
from planner import compute_memo

FOLDER = "compute"
MAX_FILES = 5000


class DiskSizeStore:
    """`compute_memo.SizeStore` on disk: one small JSON file per key, and a copy in memory."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def _path(self, key: str):
        import hashlib  # here: installing the store is part of every start, using it is not

        return cache_dir() / FOLDER / (hashlib.sha1(f"{key}\0{planner_stamp()}".encode()).hexdigest() + ".json")

    def get(self, key: str) -> dict[str, int] | None:
        with self._lock:
            if key in self._seen:
                return self._seen[key]
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            data = json.loads(self._path(key).read_bytes())
            sizes = {str(name): int(size) for name, size in data.items()}
            with self._lock:
                self._seen[key] = sizes
            return sizes
        return None

    def put(self, key: str, sizes: dict[str, int]) -> None:
        with self._lock:
            self._seen[key] = dict(sizes)
        write_atomically(self._path(key), json.dumps(sizes).encode(), MAX_FILES)


def keep_compute_sizes() -> None:
    """Price each compute buffer once per model and configuration, across runs."""
    compute_memo.use_store(DiskSizeStore())
