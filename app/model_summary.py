"""One model's summary for a list's row: its header read and the default wishes planned (app.planning's one way
in), any failure kept as the summary's error. The picker and `--list` make it through app.catalog, in their
own process or in worker processes (app.catalog_workers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.caches.plans import ModelSummary
from planner.hardware import Device, Host

if TYPE_CHECKING:
    from planner.memory import MemoryPlan


def summarize(path: str, gpus: list[Device], host: Host) -> ModelSummary:
    """Read the header and solve the default wishes (app.planning's one way in); any failure becomes
    the summary's error."""
    from app.planning import Machine, PlanChoice, plan_source, read_anatomy
    from planner.errors import PlannerError

    try:
        model = read_anatomy(path)
    except PlannerError as exc:
        return ModelSummary(error=getattr(exc, "problem", str(exc)))
    except Exception as exc:  # a hostile file must not stop the scan
        return ModelSummary(error=f"cannot read: {type(exc).__name__}: {exc}")
    summary = ModelSummary(
        name=model.name,
        architecture=model.architecture,
        n_params=model.n_params,
        quantization=model.quantization,
        file_bytes=model.file_bytes,
        n_layer=model.n_layer,
        n_ctx_train=model.n_ctx_train,
        exact=model.exact,
    )
    try:
        planned = plan_source(path, Machine(gpus, host), PlanChoice(), anatomy=model)
    except PlannerError as exc:
        summary.error = str(exc)
        return summary
    except Exception as exc:
        summary.error = f"planning failed: {type(exc).__name__}: {exc}"
        return summary
    return with_plan(summary, planned.fit.plan)


def with_plan(summary: ModelSummary, plan: MemoryPlan) -> ModelSummary:
    """The summary's fit: the plan's verdict, layers on the GPUs, context and cache choices."""
    from planner.offload import offload_badge

    summary.verdict = plan.verdict
    summary.layers_on_gpu = plan.layers_on_gpu
    summary.offload_badge = offload_badge(plan)
    summary.n_ctx = plan.resolved.n_ctx
    summary.type_k = plan.resolved.type_k.name
    summary.flash_attn = plan.resolved.config.flash_attn
    from app.speed import summary_fields

    try:
        for name, value in summary_fields(plan).items():
            setattr(summary, name, value)
    except Exception:  # no speed column for this row, rather than no row
        pass
    return summary
