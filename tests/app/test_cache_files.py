"""What the caches share: temporary files made without tempfile, atomic writes, the planner's stamp."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from app.caches.files import new_temporary, planner_stamp, write_atomically


def test_temporary_files_are_new_private_and_distinct(tmp_path: Path) -> None:
    made = [new_temporary(tmp_path) for _ in range(3)]
    for fd, _path in made:
        os.close(fd)
    paths = {path for _fd, path in made}
    assert len(paths) == 3 and all(os.path.dirname(p) == str(tmp_path) for p in paths)
    assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in paths)


def test_an_atomic_write_leaves_the_entry_alone_and_only_the_newest_entries(tmp_path: Path) -> None:
    for i in range(5):
        write_atomically(tmp_path / "c" / f"{i}.json", b"{}", keep=3)
        os.utime(tmp_path / "c" / f"{i}.json", (i, i))
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["2.json", "3.json", "4.json"]


def test_a_large_cache_keeps_about_its_newest_entries_without_being_listed_at_every_write(tmp_path: Path) -> None:
    folder = tmp_path / "sizes"
    held = []
    for i in range(300):
        write_atomically(folder / f"{i}.json", b"{}", keep=100)
        os.utime(folder / f"{i}.json", (i, i))
        held.append(len(list(folder.iterdir())))
    assert max(held) == 100 + 9  # trimmed every tenth of `keep` writes, not at each: a tenth more at most
    names = {int(p.stem) for p in folder.iterdir()}
    assert len(names) >= 100 and min(names) >= 300 - 110 and 299 in names  # the newest are kept


def test_the_planner_stamp_is_steady() -> None:
    first = planner_stamp()
    planner_stamp.cache_clear()
    assert planner_stamp() == first and len(first) == 40
