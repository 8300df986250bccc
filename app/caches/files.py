"""What the caches kept between runs share: the planner's code stamp, atomic writes, a size cap.

Every cache here is an optimisation: a file that cannot be read or written is ignored, and
the answer is worked out again.
"""

from __future__ import annotations

import contextlib
import os
import time
from functools import lru_cache
from pathlib import Path

import planner


def files_under(root: str) -> list[tuple[str, int, int]]:
    """Every file under `root`, byte-code caches aside: (path relative to `root`, size, modification time),
    sorted. A folder that cannot be read raises OSError."""
    out = []
    cut = len(os.path.join(root, ""))  # slicing rather than os.path.relpath: a fifth of the walk
    stack = [root]
    while stack:  # os.scandir rather than Path.rglob: a third of the time
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                    continue
                st = entry.stat()
                out.append((entry.path[cut:], st.st_size, st.st_mtime_ns))
    out.sort()
    return out


@lru_cache(maxsize=4)
def code_files(root: str) -> tuple[tuple[str, int, int], ...]:
    """`files_under` for a folder of vramchat's code, walked once per process (the code stamp and the replay
    key both ask for the planner's)."""
    return tuple(files_under(root))


@lru_cache(maxsize=1)
def planner_stamp() -> str:
    """Changes whenever the planner's code does (a new release, an edited rule)."""
    try:
        files = code_files(os.path.dirname(planner.__file__))
    except OSError:
        files = ()
    import hashlib  # here: every start imports this module, few need the stamp

    return hashlib.sha1("\n".join(f"{n}:{size}:{mtime}" for n, size, mtime in files).encode()).hexdigest()


def new_temporary(folder: Path, suffix: str = ".tmp") -> tuple[int, str]:
    """A new file in `folder`, made exclusively and readable by the user alone, as tempfile.mkstemp
    makes it, without tempfile's import (5 ms of a plan's start): (descriptor, path)."""
    for attempt in range(1000):
        path = os.path.join(folder, f".{os.getpid()}-{time.monotonic_ns()}-{attempt}{suffix}")
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no new temporary file could be made in {folder}")


# writes to each folder since this process last trimmed it: the folder is listed at a process's first write
# there, then once every tenth of `keep` writes (listing 5,000 cached sizes at each of a first start's hundred
# plans was a tenth of its planning)
_untrimmed: dict[tuple[Path, str], int] = {}


def write_atomically(entry: Path, data: bytes, keep: int) -> None:
    """Write `entry` whole or not at all; the folder keeps about the `keep` newest files (at most a tenth more
    between two trims)."""
    with contextlib.suppress(OSError):
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = new_temporary(entry.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, entry)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        where = (entry.parent, entry.suffix)
        written = _untrimmed.get(where)
        if written is None or written + 1 >= max(1, keep // 10):
            _untrimmed[where] = 0
            _trim(entry.parent, entry.suffix, keep)
        else:
            _untrimmed[where] = written + 1


def _trim(folder: Path, suffix: str, keep: int) -> None:
    files = list(folder.glob(f"*{suffix}"))
    if len(files) <= keep:
        return
    by_age = []
    for path in files:
        with contextlib.suppress(OSError):
            by_age.append((path.stat().st_mtime, path))
    by_age.sort()
    for _, old in by_age[:-keep]:
        with contextlib.suppress(OSError):
            old.unlink()
