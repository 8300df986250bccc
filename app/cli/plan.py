"""`vramchat --plan MODEL`: the memory plan as a table, JSON or llama.cpp's flags, confirmed by llama.cpp's dry
run with --verify; with --json, kept for app.cli.replay to say again."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from app.cli.command_plan import make_plan as _make_plan
from app.cli.exits import EXIT_NO_FIT, EXIT_OK
from app.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from planner.fit import FitResult
    from planner.memory import MemoryPlan


def run_plan(args: argparse.Namespace, replay_key=None) -> int:
    from app.devices.render import annotate_plan_json, plan_notes
    from planner.llama_args import to_llama_args
    from planner.memory import recording_fits
    from planner.report import plan_to_json, plan_to_table

    with recording_fits() as fit_log:
        path, report, planned, fixed = _make_plan(args)
        model, result = planned.anatomy, planned.fit
        confirmed = _verified(path, model, result, report, solved=not fixed) if args.verify else None
        if confirmed is not None:
            import dataclasses

            result = dataclasses.replace(result, plan=confirmed.plan)
            planned = dataclasses.replace(planned, fit=result)  # the speed of the plan llama.cpp confirmed
        committed = _committed(result.plan, report, args.elastic)
    speed = planned.speed if not args.llama_args or args.json else None
    if args.json:
        data = annotate_plan_json(plan_to_json(result), report)
        data["advice"] = _metal_advice(model, result, report)
        data["speed"] = speed.to_json() if speed is not None else None
        if committed is not None:
            data["elastic"] = _elastic_json(result.plan, committed)
        if confirmed is not None:
            from app.engine.verify import annotate_json

            annotate_json(data, result.plan, confirmed)
        data["llama_args"] = to_llama_args(result.plan, path, args.mmproj, args.image_max_tokens)
        # a speed still measuring is not said again: the next plan tries the probe once more
        if replay_key is not None and confirmed is None and not (speed is not None and speed.measuring):
            from app.cli.replay import keep

            keep(replay_key[0], args, path, data, fit_log, report, EXIT_OK if result.plan.fits else EXIT_NO_FIT)
        print(json.dumps(data, indent=2))
    elif args.llama_args:
        import shlex

        print(" ".join(shlex.quote(a) for a in to_llama_args(result.plan, path, args.mmproj, args.image_max_tokens)))
    else:
        print(plan_to_table(result))
        if speed is not None:
            print("\n" + speed.text())
        if committed is not None:
            print("\n" + _elastic_text(result.plan, committed))
        if confirmed is not None:
            from app.engine.verify import table

            print("\n" + table(result.plan, confirmed))
        notes = plan_notes(report, [d.name for d in result.plan.gpus], _metal_advice(model, result, report))
        if notes:
            print(f"\n{notes}")
    return EXIT_OK if result.plan.fits else EXIT_NO_FIT


def _metal_advice(model, result, report) -> list[str]:
    """Where a Mac's GPU working set keeps layers off the GPU that its RAM could hold: how to raise it."""
    from app.devices.free_memory import wired_limit_advice

    plan = result.plan
    metal = [d for d in report.gpus if d.backend == "metal" and d.unified]
    if not metal or plan.verdict == "full_gpu":
        return []
    from app.planning import plan_config
    from planner.errors import PlannerError

    try:
        every_layer = plan.config.with_(n_gpu_layers=model.n_layer + 1)
        full = plan_config(model, every_layer, report.gpus, report.host, plan.projector).plan
    except PlannerError:
        return []
    out = []
    for d in metal:
        usage = next((u for u in full.gpus if u.name == d.name), None)
        if usage is not None:
            line = wired_limit_advice(d, usage.planned + usage.margin, report.host.total)
            if line:
                out.append(line)
    return out


def _committed(plan, report, elastic: bool | None):
    """The plan at the context a load starts with, when the context grows with the conversation."""
    from app.elastic_context import ElasticContext
    from app.settings import load_settings

    if elastic is None:
        elastic = load_settings()[0].elastic_context
    return ElasticContext(elastic).committed_at_load(plan, report.gpus, report.host)


def _kv(plan) -> int:
    return sum(b.bytes for b in plan.buffers if b.kind in ("kv", "kv_swa"))


def _elastic_json(plan, committed) -> dict:
    def side(p) -> dict:
        return {
            "n_ctx": p.resolved.n_ctx,
            "kv": _kv(p),
            "host": p.host.planned,
            "devices": {d.name: d.planned for d in p.gpus},
        }

    return {"committed_at_load": side(committed), "maximum": side(plan)}


def _elastic_text(plan, committed) -> str:
    from planner.hardware import format_size

    def where(p) -> str:
        parts = [f"{d.name} {format_size(d.planned)}" for d in p.gpus] + [f"host {format_size(p.host.planned)}"]
        return ", ".join(parts)

    return (
        f"Context grows with the conversation\n"
        f"  committed at load  {committed.resolved.n_ctx:>7,} tokens: KV cache {format_size(_kv(committed))}; "
        f"{where(committed)}\n"
        f"  maximum            {plan.resolved.n_ctx:>7,} tokens: KV cache {format_size(_kv(plan))}; {where(plan)}"
        f" (planned and required to fit)"
    )


def _verified(path: str, model, result, report, solved: bool):
    """llama.cpp's dry run of the plan, in an engine process; a solved plan is planned again when
    llama.cpp needs more than planned."""
    from app.engine.process import EngineProcess
    from app.engine.verify import confirm_plan
    from app.planning import plan_again

    if report.simulated:
        raise UsageError(
            "--verify asks llama.cpp on this machine's devices: it cannot check simulated ones (--vram, --ram)"
        )
    from app.sources import local_path

    path = local_path(path)  # a remote model: a sparse copy of its headers, nothing downloaded
    engine = EngineProcess()
    try:
        return confirm_plan(
            engine,
            path,
            result.plan,
            report.gpus,
            report.host,
            (lambda g, h: _fitting(plan_again(model, result.plan, g, h))) if solved else (lambda g, h: None),
        )
    finally:
        engine.close()


def _fitting(fit: FitResult) -> MemoryPlan | None:
    """The plan of `fit` when it fits (what llama.cpp's dry run is checked again with), else None."""
    return fit.plan if fit.plan.fits else None
