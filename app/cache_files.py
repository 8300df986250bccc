"""What the caches kept between runs share: the planner's code stamp, atomic writes, a size cap.

Every cache here is an optimisation: a file that cannot be read or written is ignored, and
the answer is worked out again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from functools import lru_cache
from pathlib import Path

import planner


@lru_cache(maxsize=1)
def planner_stamp() -> str:
    """Changes whenever the planner's code does (a new release, an edited rule)."""
    root = Path(planner.__file__).parent
    parts = []
    for path in sorted(root.rglob("*.py")):
        with contextlib.suppress(OSError):
            st = path.stat()
            parts.append(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()


def write_atomically(entry: Path, data: bytes, keep: int) -> None:
    """Write `entry` whole or not at all, then keep only the `keep` newest files beside it."""
    with contextlib.suppress(OSError):
        entry.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # only when writing: its import costs every start 5 ms

        fd, tmp = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, entry)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _trim(entry.parent, entry.suffix, keep)


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
