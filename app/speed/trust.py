"""Whether a speed probe's figures can be trusted, or were taken while something else held the cores.

Another program on the machine only ever slows a run, and on a few cores it slows it by a
scheduler's time slice, not by a few percent: a disturbed 8 MiB mat-vec reads at 0.3 GB/s
where its neighbours read at 30 (a Q3_K rate 13x below every other type once made every
Q3_K quant look ten times too slow). So a probe is judged on three things it carries:

- the share of the CPUs other processes used while it ran (`load`, measured by the probe);
- its per-type rates against each other: a genuine spread between ggml's kernels stays within
  a few times the median (4x at most on the machines seen), a disturbed one is 10-300x off;
- the graph's start, a few microseconds, where a disturbed one takes a whole time slice.

A probe that fails any of these is not kept and its figures are not shown: the speed reads
"measuring…" until a probe passes (app/speed/machine.py).
"""

from __future__ import annotations

import statistics
from typing import Any

BUSY_LOAD = 0.25  # other processes' share of the CPUs above which a probe is not trusted
MAX_FROM_MEDIAN = 6.0  # a type's rate this many times off the median of all types: disturbed
MAX_GRAPH_SECONDS = 2e-3  # a graph's start beyond this waited for a core (quiet: microseconds)


def distrust(figures: dict[str, Any]) -> str | None:
    """Why these probe figures cannot be trusted (words for the user), or None when they can."""
    load = figures.get("load")
    if isinstance(load, (int, float)) and load > BUSY_LOAD:
        return f"the machine was busy (other programs used {load:.0%} of the CPUs)"
    for name, what in (("decode_rates", "mat-vec"), ("prefill_rates", "mat-mul")):
        odd = _outlier(figures.get(name))
        if odd is not None:
            type_name, factor, side = odd
            return (
                f"the machine was busy (the {type_name} {what} timed {factor:.0f}x {side} than the other types: "
                "a disturbed sample)"
            )
    start = figures.get("graph_seconds")
    if isinstance(start, (int, float)) and start > MAX_GRAPH_SECONDS:
        return f"the machine was busy (a graph waited {start * 1000:.0f} ms for a core)"
    return None


def _outlier(rates: Any) -> tuple[str, float, str] | None:
    """The type furthest from the median rate when it is beyond MAX_FROM_MEDIAN: (type, factor, side)."""
    if not isinstance(rates, dict):
        return None
    values = {str(k): float(v) for k, v in rates.items() if isinstance(v, (int, float)) and v > 0}
    if len(values) < 3:
        return None
    middle = statistics.median(values.values())
    name = max(values, key=lambda k: max(values[k] / middle, middle / values[k]))
    rate = values[name]
    if rate * MAX_FROM_MEDIAN < middle:
        return name, middle / rate, "slower"
    if rate > middle * MAX_FROM_MEDIAN:
        return name, rate / middle, "faster"
    return None
