"""A context that grows with the conversation: the sizes it steps through, and what a load commits.

llama.cpp reserves the whole KV cache when it creates a context, and GPU buffers
cannot be paged in on demand: the only way to hold less is to allocate less. So
vramchat plans (and reserves room for) the maximum context, loads a small one, and
makes a larger context when a prompt and its reply would not fit, carrying the
conversation over. Sizes double from the start size, then go up in quarters of the
maximum near the top, so that a long chat takes a few steps and none is wasteful.
"""

from __future__ import annotations

from planner.config import CTX_PAD
from planner.hardware import Device, Host
from planner.memory import MemoryPlan, plan_memory
from planner.units import round_up

START_CTX = 4096


def _pad(n: int) -> int:
    return round_up(n, CTX_PAD)


def steps(maximum: int, start: int = START_CTX) -> list[int]:
    """The context sizes, smallest first, ending at `maximum`."""
    maximum = _pad(maximum)
    size = min(_pad(start), maximum)
    out = [size]
    quarter = _pad(max(maximum // 4, CTX_PAD))
    while out[-1] < maximum:
        size = out[-1] * 2 if out[-1] * 2 <= maximum // 2 else out[-1] + quarter
        out.append(min(size, maximum))
    return out


def start_size(maximum: int, first_need: int = 0, start: int = START_CTX) -> int:
    """The context a load starts with: the start size, or what the first prompt needs."""
    return next_size(min(_pad(start), _pad(maximum)), first_need, maximum, start) or _pad(maximum)


def next_size(current: int, needed: int, maximum: int, start: int = START_CTX) -> int | None:
    """The smallest step that holds `needed` tokens and is no smaller than `current`; None when even
    the maximum cannot."""
    if needed > _pad(maximum):
        return None
    return next(s for s in steps(maximum, start) if s >= max(needed, current))


def committed_plan(plan: MemoryPlan, n_ctx: int, gpus: list[Device], host: Host) -> MemoryPlan:
    """The plan's configuration at a smaller context: what a load that starts there commits."""
    if n_ctx >= plan.resolved.n_ctx:
        return plan
    margins = {u.name: u.margin for u in [*plan.gpus, plan.host]}
    return plan_memory(plan.model, plan.config.with_(n_ctx=n_ctx), gpus, host, margins, projector=plan.projector)
