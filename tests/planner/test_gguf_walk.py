"""The vocabulary walk: the fast aligned walk lands where a checked walk does, and fails as it does."""

from __future__ import annotations

import struct

import pytest

from planner.errors import GGUFError
from planner.gguf import _Cursor


def _strings(lengths: list[int], start: int) -> bytes:
    out = bytearray(b"x" * start)
    for n in lengths:
        out += struct.pack("<Q", n) + bytes(range(n % 7, n % 7 + n)) if n < 200 else struct.pack("<Q", n) + b"y" * n
    return bytes(out)


@pytest.mark.parametrize("start", range(8))
def test_the_fast_walk_lands_where_the_checked_walk_does(start: int) -> None:
    lengths = [(i * 37) % 23 for i in range(300)]
    buf = _strings(lengths, start) + b"tail"
    fast = _Cursor(memoryview(buf), "m.gguf")
    fast.pos = start
    fast.skip_strings(len(lengths), "tokens")
    checked = _Cursor(memoryview(buf), "m.gguf")
    checked.pos = start
    checked._skip_strings_checked(len(lengths), "tokens")
    assert fast.pos == checked.pos == len(buf) - 4


@pytest.mark.parametrize("cut", [1, 5, 8, 9, 40])
def test_a_truncated_vocabulary_fails_with_the_checked_walk_s_message(cut: int) -> None:
    lengths = [3] * 100
    buf = _strings(lengths, 3)[:-cut]
    cur = _Cursor(memoryview(buf), "m.gguf")
    cur.pos = 3
    with pytest.raises(GGUFError) as fast:
        cur.skip_strings(len(lengths), "tokens")
    cur = _Cursor(memoryview(buf), "m.gguf")
    cur.pos = 3
    with pytest.raises(GGUFError) as checked:
        cur._skip_strings_checked(len(lengths), "tokens")
    assert str(fast.value) == str(checked.value) and "tokens[9" in str(fast.value)


def test_a_hostile_length_fails_without_a_crash() -> None:
    buf = bytearray(_strings([2] * 100, 0))
    buf[8 * 10 + 2 * 10 : 8 * 10 + 2 * 10 + 8] = struct.pack("<Q", 2**64 - 1)  # string #10's length
    cur = _Cursor(memoryview(bytes(buf)), "m.gguf")
    with pytest.raises(GGUFError, match=r"tokens\[10\] claims"):
        cur.skip_strings(100, "tokens")
    assert _Cursor(bytes(buf), "m.gguf").end == len(buf)  # bytes work too (no memoryview given)
