"""Whether a speed probe's figures can be trusted, or were taken while something else held the cores.

Another program on the machine only ever slows a run, and on a few cores it slows it by a
scheduler's time slice, not by a few percent: a disturbed 8 MiB mat-vec reads at 0.3 GB/s
where its neighbours read at 30 (a Q3_K rate 13x below every other type once made every
Q3_K quant look ten times too slow). So a probe is judged on three things it carries:

- the share of the CPUs other processes used while it ran (`load`, measured by the probe);
- its per-type rates against each other: a genuine spread between ggml's kernels stays within
  a few times the median (4x at most on the machines seen), a disturbed one is 10-300x off;
- its attention timings against its own rates (a cell's bytes at the mat-vec rate, its FLOPs at
  the mat-mul rate): within a few times quiet, 50x slower disturbed;
- the graph's start, a few microseconds, where a disturbed one takes a whole time slice.

A probe that fails any of these is not kept and its figures are not shown: the speed reads
"measuring…" until a probe passes (app/speed/machine.py).
"""

from __future__ import annotations

from typing import Any

from planner.median import median

BUSY_LOAD = 0.25  # other processes' share of the CPUs above which a probe is not trusted
MAX_FROM_MEDIAN = 6.0  # a type's rate this many times off the median of all types: disturbed
MAX_ATTENTION_FACTOR = 12.0  # attention this many times slower than its bytes or FLOPs at the probe's rates
# what a cell costs besides its bytes (the softmax step; a head width under the SIMD step runs one by one:
# 38 ns a cell at width 32 on one AVX-512 core, 2.6 ns of bytes)
CELL_SECONDS = 3e-9
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
    odd_attention = _slow_attention(figures)
    if odd_attention is not None:
        return f"the machine was busy ({odd_attention}: a disturbed sample)"
    start = figures.get("graph_seconds")
    if isinstance(start, (int, float)) and start > MAX_GRAPH_SECONDS:
        return f"the machine was busy (a graph waited {start * 1000:.0f} ms for a core)"
    return None


def _slow_attention(figures: dict[str, Any]) -> str | None:
    """Attention timed far slower than the rest: a token's reads (K and V of f16, 4 x width bytes a cell)
    against the median mat-vec rate; a prompt's arithmetic (4 x width FLOPs a cell) against the fastest
    mat-mul rate, each plus a cell's fixed cost. Quiet, both sit within 8x; a disturbed one is 50x off."""
    decode = [float(v) for v in (figures.get("decode_rates") or {}).values() if isinstance(v, (int, float)) and v > 0]
    prefill = [float(v) for v in (figures.get("prefill_rates") or {}).values() if isinstance(v, (int, float)) and v > 0]
    checks = (
        ("attention_seconds", "a token's attention", median(decode) if decode else 0.0),
        ("prefill_attention_seconds", "a prompt's attention", max(prefill) if prefill else 0.0),
    )
    for name, what, rate in checks:
        timed = figures.get(name)
        if not isinstance(timed, dict) or not rate:
            continue
        for width, seconds in timed.items():
            if not isinstance(seconds, (int, float)) or seconds <= 0:
                continue
            expected = 4 * int(width) / rate + CELL_SECONDS
            if seconds > expected * MAX_ATTENTION_FACTOR:
                return f"{what} at width {width} timed {seconds / expected:.0f}x slower than its work"
    return None


def _outlier(rates: Any) -> tuple[str, float, str] | None:
    """The type furthest from the median rate when it is beyond MAX_FROM_MEDIAN: (type, factor, side)."""
    if not isinstance(rates, dict):
        return None
    values = {str(k): float(v) for k, v in rates.items() if isinstance(v, (int, float)) and v > 0}
    if len(values) < 3:
        return None
    middle = median(values.values())
    name = max(values, key=lambda k: max(values[k] / middle, middle / values[k]))
    rate = values[name]
    if rate * MAX_FROM_MEDIAN < middle:
        return name, middle / rate, "slower"
    if rate > middle * MAX_FROM_MEDIAN:
        return name, rate / middle, "faster"
    return None
