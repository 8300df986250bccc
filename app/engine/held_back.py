"""How much of a streamed text to hold back: the end that could be the start of a marker not yet whole
(a stop string the engine cuts at, a reasoning block's close), shown once the next piece says."""

from __future__ import annotations


def held_back(text: str, markers: tuple[str, ...]) -> int:
    """How many characters at the end of `text` could begin one of `markers`."""
    hold = 0
    for marker in markers:
        for k in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:k]):
                hold = max(hold, k)
                break
    return hold


def first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    """Where the first of `stops` in `text` begins, or None when none is there."""
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else None
