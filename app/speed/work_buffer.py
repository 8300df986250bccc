"""A ggml work buffer placed as llama.cpp's CPU backend places its own, for the speed probe's graphs.

ggml-cpu gives a graph's work buffer (a prompt's activations converted for the mat-muls, each thread's
flash-attention tiles) from `new uint8_t[work_size]`: plain malloc. A real model's prompt needs far more
than malloc's mmap threshold, and glibc hands such a block out 16 bytes past a page boundary, so it is
never 64-byte aligned. ggml's tiled flash attention runs 30-40% slower from a buffer so placed than from
an aligned one (2 EPYC cores, 128 queries over 512 cells: 1.97 against 1.46 ns a cell and head 64 wide,
3.39 against 2.33 at 128; decode's attention and the mat-vecs do not care). A buffer from Python's own
allocator lands anywhere, so the probe's figures were one or the other by chance, per width and per run.
"""

from __future__ import annotations

import ctypes
import functools
import os

CACHE_LINE = 64
LARGE_BLOCK = 33 << 20  # above glibc's largest mmap threshold (32 MiB): always its own mapping


GLIBC_MMAP_HEADER = 16  # glibc maps a large block with its chunk's two size words before it


@functools.cache
def large_block_offset() -> int:
    """Where this platform's malloc puts a large block's start within a cache line: glibc's 16, known rather
    than asked (a process whose heap already has room serves even 33 MiB from it, anywhere 16-aligned);
    elsewhere asked of malloc itself (a libc that aligns large blocks to pages: 0), 0 where it cannot be."""
    if _glibc():
        return GLIBC_MMAP_HEADER
    try:
        libc = ctypes.CDLL(None)
        libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
        libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
    except (OSError, AttributeError):
        return 0
    block = libc.malloc(LARGE_BLOCK)  # untouched pages: no memory is used
    if not block:
        return 0
    libc.free(block)
    return int(block) % CACHE_LINE


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError, AttributeError):
        return False


def engine_work_buffer(size: int) -> tuple[ctypes.Array[ctypes.c_char], int]:
    """A buffer of at least `size` bytes and the address to hand ggml: as far into a cache line as
    llama.cpp's own work buffer would be. Keep the first element alive while the address is in use."""
    raw = ctypes.create_string_buffer(size + 2 * CACHE_LINE)
    start = -(-ctypes.addressof(raw) // CACHE_LINE) * CACHE_LINE
    return raw, start + large_block_offset()
