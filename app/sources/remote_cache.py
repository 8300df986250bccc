"""What is kept of remote models between runs, so that a repo seen once plans at once, and offline.

- each file's header bytes (everything before its tensor data: what a sparse copy for llama.cpp's dry
  run needs, and what is parsed again when the planner changes), keyed by what identifies the file's
  content: the hub's LFS sha256, or an URL's ETag, with its size. Kept as they are: compressing a
  vocabulary costs 80 ms a header (1.3 s of CPU for a repo of 16 quants), for half the disk
- each model's parsed anatomy, keyed by its files' identities, the name the plan gives it and the
  planner's code (as app/caches/headers.py keys local ones)
- each repo listing (commit, files, sizes, checksums) and each URL's last identity, for offline use

Like every cache here, a file that cannot be read or written is ignored: the header is read again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import pickle
import time
from pathlib import Path
from typing import Any

from app.caches.files import planner_stamp, write_atomically
from app.paths import cache_dir

FOLDER = "remote"
MAX_HEADERS = 40  # a header is up to a few MB (the demo's 6.5): the newest 40 are kept
MAX_ANATOMIES = 500
MAX_LISTINGS = 500


def _folder(kind: str) -> Path:
    return cache_dir() / FOLDER / kind


def _name(*parts: object) -> str:
    return hashlib.sha1("\0".join(str(p) for p in parts).encode()).hexdigest()


# -- header bytes ------------------------------------------------------------------------------------


def header_entry(identity: str, size: int) -> Path | None:
    if not identity:
        return None
    return _folder("headers") / f"{_name(identity, size)}.header"


def load_header(identity: str, size: int) -> bytes | None:
    entry = header_entry(identity, size)
    if entry is None:
        return None
    with contextlib.suppress(OSError):
        return entry.read_bytes()
    return None


def keep_header(identity: str, size: int, data: bytes) -> None:
    entry = header_entry(identity, size)
    if entry is not None:
        write_atomically(entry, data, MAX_HEADERS)


# -- parsed models -----------------------------------------------------------------------------------


def anatomy_entry(ref: str, identities: list[tuple[str, int]]) -> Path | None:
    if not identities or any(not identity for identity, _ in identities):
        return None
    return _folder("anatomy") / f"{_name(ref, identities, planner_stamp())}.pickle"


def load_anatomy(ref: str, identities: list[tuple[str, int]]) -> Any | None:
    from planner.model import ModelAnatomy

    entry = anatomy_entry(ref, identities)
    if entry is None:
        return None
    with contextlib.suppress(Exception):  # missing, damaged, or from another Python: read again
        with entry.open("rb") as handle:
            anatomy = pickle.load(handle)
        if isinstance(anatomy, ModelAnatomy):
            return anatomy
    return None


def keep_anatomy(ref: str, identities: list[tuple[str, int]], anatomy: Any) -> None:
    entry = anatomy_entry(ref, identities)
    if entry is not None:
        with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError):
            write_atomically(entry, pickle.dumps(anatomy, protocol=pickle.HIGHEST_PROTOCOL), MAX_ANATOMIES)


# -- listings and URL identities (JSON) --------------------------------------------------------------


def load_record(kind: str, *key: object) -> dict[str, Any] | None:
    with contextlib.suppress(Exception):
        data = json.loads((_folder(kind) / f"{_name(*key)}.json").read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("key") == [str(k) for k in key]:
            return data
    return None


def keep_record(kind: str, record: dict[str, Any], *key: object) -> None:
    record = {**record, "key": [str(k) for k in key], "saved": time.time()}
    write_atomically(_folder(kind) / f"{_name(*key)}.json", json.dumps(record).encode(), MAX_LISTINGS)


def records(kind: str) -> list[dict[str, Any]]:
    """Every record of `kind` kept (a listing of each repo seen, say), newest first; unreadable ones skipped."""
    found = []
    with contextlib.suppress(OSError):
        for entry in _folder(kind).glob("*.json"):
            with contextlib.suppress(Exception):
                data = json.loads(entry.read_text(encoding="utf-8"))
                if isinstance(data, dict) and isinstance(data.get("key"), list):
                    found.append(data)
    found.sort(key=lambda r: -float(r.get("saved") or 0))
    return found
