"""The vocabulary walk: the fast aligned walk lands where a checked walk does, and fails as it does;
also when the bytes arrive as the walk reaches them (a remote header read by ranges, 16 bytes first)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from planner.errors import GGUFError
from planner.gguf import _Cursor, _GrowingCursor


class _Bytes:
    """A file in memory, read by ranges."""

    def __init__(self, data: bytes) -> None:
        self.data, self.size, self.name = data, len(data), "m.gguf"

    def read(self, start: int, end: int) -> bytes:
        return self.data[start:end]


CURSORS: dict[str, Callable[[bytes], _Cursor]] = {
    "mapped": lambda buf: _Cursor(memoryview(buf), "m.gguf"),
    "growing": lambda buf: _GrowingCursor(_Bytes(buf), 16, 1 << 30),
}


@pytest.fixture(params=sorted(CURSORS))
def cursor(request: pytest.FixtureRequest) -> Callable[[bytes], _Cursor]:
    return CURSORS[request.param]


def _strings(lengths: list[int], start: int) -> bytes:
    out = bytearray(b"x" * start)
    for n in lengths:
        out += struct.pack("<Q", n) + bytes(range(n % 7, n % 7 + n)) if n < 200 else struct.pack("<Q", n) + b"y" * n
    return bytes(out)


@pytest.mark.parametrize("start", range(8))
def test_the_fast_walk_lands_where_the_checked_walk_does(start: int, cursor: Callable[[bytes], _Cursor]) -> None:
    lengths = [(i * 37) % 23 for i in range(300)]
    buf = _strings(lengths, start) + b"tail"
    fast = cursor(buf)
    fast.pos = start
    fast.skip_strings(len(lengths), "tokens")
    checked = _Cursor(memoryview(buf), "m.gguf")
    checked.pos = start
    checked._skip_strings_checked(len(lengths), "tokens")
    assert fast.pos == checked.pos == len(buf) - 4


@pytest.mark.parametrize("cut", [1, 5, 8, 9, 40])
def test_a_truncated_vocabulary_fails_with_the_checked_walk_s_message(
    cut: int, cursor: Callable[[bytes], _Cursor]
) -> None:
    lengths = [3] * 100
    buf = _strings(lengths, 3)[:-cut]
    cur = cursor(buf)
    cur.pos = 3
    with pytest.raises(GGUFError) as fast:
        cur.skip_strings(len(lengths), "tokens")
    cur = _Cursor(memoryview(buf), "m.gguf")
    cur.pos = 3
    with pytest.raises(GGUFError) as checked:
        cur._skip_strings_checked(len(lengths), "tokens")
    assert str(fast.value) == str(checked.value) and "tokens[9" in str(fast.value)


def test_a_hostile_length_fails_without_a_crash(cursor: Callable[[bytes], _Cursor]) -> None:
    buf = bytearray(_strings([2] * 100, 0))
    buf[8 * 10 + 2 * 10 : 8 * 10 + 2 * 10 + 8] = struct.pack("<Q", 2**64 - 1)  # string #10's length
    cur = cursor(bytes(buf))
    with pytest.raises(GGUFError, match=r"tokens\[10\] claims"):
        cur.skip_strings(100, "tokens")
    assert _Cursor(bytes(buf), "m.gguf").end == len(buf)  # bytes work too (no memoryview given)


def test_a_remote_header_past_the_limit_is_refused_without_reading_on() -> None:
    """A vocabulary of legal (empty) strings longer than any real header: the remote reader stops at its
    limit; the bytes it fetched stay within it."""
    source = _Bytes(_strings([0] * 10_000, 0) + b"tail")
    cur = _GrowingCursor(source, 64, 4096)
    with pytest.raises(GGUFError, match="more than any real GGUF header"):
        cur.skip_strings(10_000, "tokens")
    assert len(cur.buf) <= 4096
