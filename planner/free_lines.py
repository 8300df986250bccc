"""The sentences of a plan that quote a device's free memory.

Free memory changes from one run to the next while the plan itself often does not: a plan
cached by the app (`app.cli.replay`) is said again for the memory free now. So each such
sentence is a `FreeLine`: a plain string to every reader, which also keeps what it was made
from, to be said again for another free figure. Imports nothing heavy (no dataclasses).
"""

from __future__ import annotations

from planner.units import format_size

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app.cli.replay imports this module)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def _gpu_budget(free: int, name: str, planned: int, margin: int, shared: int) -> str:
    headroom = free - margin - shared - planned
    return (
        f"{name}: {format_size(planned)} of {format_size(free)} free "
        f"({format_size(headroom)} spare after a {format_size(margin)} margin)"
    )


def _host_budget(free: int, planned: int, mapped: int) -> str:
    return (
        f"Host RAM: {format_size(planned)} planned of {format_size(free)} free "
        f"({format_size(mapped)} of it memory-mapped model file)"
    )


def _over_budget(free: int, name: str, planned: int, margin: int, shared: int) -> str:
    available = free - margin - shared
    return (
        f"{name} needs {format_size(planned)} but only {format_size(max(available, 0))} "
        f"is available ({format_size(free)} free, {format_size(margin)} kept as margin)"
    )


_SAY: dict[str, Callable[..., str]] = {
    "gpu_budget": _gpu_budget,
    "host_budget": _host_budget,
    "over_budget": _over_budget,
}


def say(kind: str, free: int, values: dict[str, Any]) -> str:
    """The sentence `kind` for `free` bytes free."""
    return _SAY[kind](free, **values)


class FreeLine(str):
    """A sentence quoting the free memory of `device` (llama.cpp's name; CPU for host RAM)."""

    kind: str
    device: str
    free: int
    values: dict[str, Any]

    def __new__(cls, kind: str, device: str, free: int, **values: Any) -> FreeLine:
        line = super().__new__(cls, say(kind, free, values))
        line.kind, line.device, line.free, line.values = kind, device, free, values
        return line

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.kind, self.device, self.free, self.values))


def _rebuild(kind: str, device: str, free: int, values: dict[str, Any]) -> FreeLine:
    return FreeLine(kind, device, free, **values)
