"""The one owner of the growing context's policy: whether it grows, where a load starts, the next
step, where a new chat goes back to, and what a load commits.

The sizes themselves are the planner's (`planner.elastic`); this decides when they apply, for the
session that loads and resizes the engine and for the command line that prints the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner.elastic import next_size, start_size

if TYPE_CHECKING:
    from planner.hardware import Device, Host
    from planner.memory import MemoryPlan


@dataclass(frozen=True)
class ElasticContext:
    """`enabled`: start small and grow with the conversation (the `elastic_context` setting, or
    `--elastic`); off, a load takes the whole planned context at once, as llama.cpp does."""

    enabled: bool = True

    def grows(self, plan: MemoryPlan) -> bool:
        """Whether a load of this plan starts below its maximum (a model without a KV cache never grows)."""
        return self.enabled and bool(plan.kv.tensors) and start_size(plan.resolved.n_ctx) < plan.resolved.n_ctx

    def load_size(self, plan: MemoryPlan) -> int:
        """The context a load of `plan` asks llama.cpp for."""
        return start_size(plan.resolved.n_ctx) if self.grows(plan) else plan.resolved.n_ctx

    def next(self, current: int, needed: int, maximum: int) -> int | None:
        """The size to grow to for `needed` tokens; None when no growth is due (or none would hold them)."""
        if not self.enabled or needed <= current:
            return None
        target = next_size(current, needed, maximum) or maximum
        return target if target > current else None

    def reset_size(self, current: int, maximum: int) -> int | None:
        """The size a new chat goes back to; None when the context is there already."""
        if not self.enabled:
            return None
        start = start_size(maximum)
        return start if current > start else None

    def committed_at_load(self, plan: MemoryPlan, gpus: list[Device], host: Host) -> MemoryPlan | None:
        """The plan at the size a load starts with, when that is below the maximum; None otherwise."""
        if not self.grows(plan):
            return None
        from app.planning import plan_at_context  # the one door for every plan after the first

        return plan_at_context(plan, self.load_size(plan), gpus, host)
