"""How much of a remote GGUF file the first read takes: the reader (headers.py) and the URL identity
probe (url.py) both start with it, so that the first block read is the one the header needs."""

from __future__ import annotations

from planner.gguf import FIRST_BLOCK

LATER_SHARD_BLOCK = 64 * 1024  # a split model's later shards hold a few keys and their tensors' table


def first_block_of(index: int) -> int:
    """The first read of a shard's header: the first shard holds the vocabulary, the others little."""
    return FIRST_BLOCK if index == 0 else LATER_SHARD_BLOCK
