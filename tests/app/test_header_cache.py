"""Parsed headers kept between runs: a second plan of the same file skips reading its header."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import planner.gguf
from app.header_cache import load_anatomy_cached


def test_a_second_read_comes_from_the_cache_and_a_changed_file_is_read_again(
    zoo: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(zoo["llama-f16"].read_bytes())
    first = load_anatomy_cached(str(path))

    def no_reading(*_args, **_kwargs):
        raise AssertionError("the header was read again")

    monkeypatch.setattr(planner.gguf, "read_gguf", no_reading)
    again = load_anatomy_cached(str(path))
    assert again.architecture == first.architecture and again.n_layer == first.n_layer
    assert [t.name for t in again.input_tensors] == [t.name for t in first.input_tensors]

    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # the file changed
    with pytest.raises(AssertionError, match="read again"):
        load_anatomy_cached(str(path))


def test_a_damaged_cache_entry_is_read_past(zoo: dict[str, Path], tmp_path: Path) -> None:
    from app.header_cache import _entry

    path = str(zoo["llama-f16"])
    load_anatomy_cached(path)
    entry = _entry(path)
    assert entry is not None and entry.exists()
    entry.write_bytes(b"not a pickle")
    assert load_anatomy_cached(path).architecture == "llama"
