"""The median, without the statistics module: importing it brings decimal, fractions and random, about 4 ms
of every plan's start, for one sort."""

from __future__ import annotations

from collections.abc import Iterable


def median(values: Iterable[float]) -> float:
    """statistics.median: the middle value, or the mean of the two middle ones; ValueError for none."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("the median of no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
