"""Markers in a streamed text (a stop string the engine cuts at, a reasoning block's close): the end that
could be the start of one not yet whole, kept back until the next piece says, and the first stop."""

from __future__ import annotations


def partial_marker(text: str, markers: tuple[str, ...]) -> int:
    """How many characters at the end of `text` could begin one of `markers`."""
    longest = 0
    for marker in markers:
        for k in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:k]):
                longest = max(longest, k)
                break
    return longest


def first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    """Where the first of `stops` in `text` begins, or None when none is there."""
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None
