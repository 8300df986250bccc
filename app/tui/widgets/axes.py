"""Axis ticks and labels for the dashboard's plots: bytes (in the unit the range calls for) and time
before now ("-2m", "-30s", "now"), as few as the plot's size holds so that no two labels touch."""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual_plot import AxisFormatter

from planner.hardware import GiB, MiB

KiB = 1024
_NICE = (1, 2, 2.5, 5)


def _nice_step(span: float, most: int) -> float:
    """The smallest 1-2-2.5-5 x 10^k step that puts at most `most` intervals in `span`."""
    if span <= 0:
        return 1.0
    raw = span / max(most, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(nice * magnitude for nice in (*_NICE, 10) if nice * magnitude >= raw * (1 - 1e-9))


def _ticks(low: float, high: float, step: float) -> list[float]:
    first = int(low // step) * step
    if first < low - 1e-9:
        first += step
    out, value = [], first
    while value <= high + step * 1e-6:
        out.append(round(value, 9))
        value += step
    return out


def byte_unit(top: float) -> tuple[str, float]:
    if top >= 2 * GiB:
        return "GiB", GiB
    if top >= 2 * MiB:
        return "MiB", MiB
    return "KiB", KiB


def byte_label(value: float, unit: str, size: float) -> str:
    if value == 0:
        return "0"
    n = value / size
    text = f"{n:.0f}" if abs(n - round(n)) < 1e-6 else f"{n:.1f}".rstrip("0").rstrip(".")
    return f"{text} {unit}"


class BytesFormatter(AxisFormatter):
    """Ticks at round figures of one unit (GiB, MiB or KiB, by the axis's top): '0', '4 GiB', '8 GiB'."""

    def __init__(self) -> None:
        self.most = 3  # intervals on the axis: set from the plot's height

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        _, size = byte_unit(max_)
        step = _nice_step((max_ - min_) / size, self.most) * size
        return _ticks(min_, max_, step)

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        unit, size = byte_unit(max(ticks, default=0))
        return [byte_label(t, unit, size) for t in ticks]


class RateFormatter(AxisFormatter):
    """Plain figures for tokens per second: '0', '20', '40'."""

    def __init__(self) -> None:
        self.most = 3

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        return _ticks(min_, max_, _nice_step(max_ - min_, self.most))

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return [f"{t:g}" for t in ticks]


_TIME_STEPS = (5, 10, 15, 30, 60, 120, 300, 600)


def ago_label(seconds: float) -> str:
    s = round(-seconds)
    if s == 0:
        return "now"
    return f"-{s // 60}m" if s % 60 == 0 else f"-{s}s"


class AgoFormatter(AxisFormatter):
    """Seconds before now: '-2m', '-60s' ... 'now', as many as the width holds."""

    def __init__(self) -> None:
        self.most = 4

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        span = max_ - min_
        step = next((s for s in _TIME_STEPS if span / s <= self.most), _TIME_STEPS[-1])
        return [-t for t in reversed(_ticks(-max_, -min_, step))]

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return [ago_label(t) for t in ticks]
