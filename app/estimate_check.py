"""Estimated plans checked by llama.cpp: what turns a row's "estimate" into "checked".

A model of an architecture the planner has no exact rules for is planned as an estimate. The
picker asks llama.cpp's own dry run about each such row's default plan, as `--plan --verify` does
(`app.engine.verify.confirm_plan`, in an engine process: llama.cpp's backends never load in the UI
process), one model at a time after the list is drawn. The plan llama.cpp's figures fit replaces
the estimate in the row's summary, marked `checked`, and the plan cache keeps it for this file and
this machine's devices (`app.caches.plans`), so the next start, and `vramchat --list`, show it at once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from app.caches.plans import ModelSummary

if TYPE_CHECKING:
    from app.engine.verify import DryRunner
    from planner.fit import FitResult
    from planner.hardware import Device, Host
    from planner.memory import MemoryPlan


def needs_check(summary: ModelSummary | None) -> bool:
    """A planned row whose figures are an estimate llama.cpp has not checked yet, of a model that
    can be loaded for a chat (an embedding model's plan is never acted on)."""
    from planner.archs import not_for_chat

    return (
        summary is not None
        and not summary.error
        and bool(summary.verdict)
        and not summary.exact
        and not summary.checked
        and not_for_chat(summary.architecture) is None
    )


def check_summary(
    runner: DryRunner, path: str, summary: ModelSummary, gpus: list[Device], host: Host
) -> tuple[ModelSummary, FitResult] | None:
    """The default plan of `path`, confirmed (or corrected) by llama.cpp's dry run: the row's summary
    with that plan's fit, marked checked, and the plan itself. None where the runner has no dry run
    (a fake engine), the header no longer plans, or llama.cpp refuses the configuration."""
    from app.engine.verify import confirm_plan
    from app.model_summary import with_plan
    from app.planning import Machine, PlanChoice, plan_again, plan_source
    from planner.errors import PlannerError

    try:
        planned = plan_source(path, Machine(gpus, host), PlanChoice())
    except PlannerError:
        return None
    model, result = planned.anatomy, planned.fit

    def again(g: list[Device], h: Host) -> MemoryPlan | None:
        fit = plan_again(model, result.plan, g, h)
        return fit.plan if fit.plan.fits else None

    confirmed = confirm_plan(runner, path, result.plan, gpus, host, again)
    if confirmed is None or not confirmed.verification.dry_run.ok:
        return None
    checked = with_plan(replace(summary, checked=True), confirmed.plan)
    return checked, replace(result, plan=confirmed.plan)
