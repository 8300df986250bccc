"""The plan a command line asks for: its MODEL resolved, its devices probed, its knobs read as
app.planning's rule reads them. `--plan`, `-p` and `--quants` (app.remote_cli) share it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from app.errors import UsageError, VramchatError

if TYPE_CHECKING:
    import argparse

    from app.devices import DeviceReport
    from app.planning import PlanChoice
    from planner.fit import FitResult
    from planner.model import ModelAnatomy


def resolve_model(name: str | None) -> str:
    if not name:
        raise UsageError("--plan needs a MODEL (a .gguf file, or 'demo')")
    from app.demo import DEMO_NAMES, demo_model_path

    if name in DEMO_NAMES:
        return str(demo_model_path())
    if os.path.exists(name) or ("/" not in name and ":" not in name):
        return name
    from app.sources import canonical_ref  # hf:ORG/REPO:QUANT, an URL: the file it names

    return canonical_ref(name)


def choice_of(args: argparse.Namespace, projector: Any = None) -> PlanChoice:
    """The command line's knobs as a choice: what they mean is app.planning's rule, the picker's too."""
    from app.planning import PlanChoice

    return PlanChoice(
        n_ctx=args.ctx or None,
        kv=args.ctk or "auto",
        n_gpu_layers=args.ngl,
        flash_attn=args.fa or "auto",
        type_v=args.ctv,
        n_batch=args.batch,
        n_ubatch=args.ubatch,
        swa_full=args.swa_full,
        n_seq_max=args.parallel,
        n_cpu_moe=args.n_cpu_moe,
        cpu_extra_buffers=args.repack,
        min_speed=getattr(args, "min_speed", None),
        margins={},
        projector=projector,
    )


def make_plan(args: argparse.Namespace) -> tuple[str, ModelAnatomy, DeviceReport, FitResult, bool]:
    """The plan for MODEL and the command line's wishes or fixed configuration: (path, anatomy, device
    report, FitResult, fixed)."""
    import dataclasses

    from app.devices import probe_devices
    from app.planning import MAX_CONTEXT, plan_model
    from planner.errors import ConfigError

    path = resolve_model(args.model)
    if args.ctx is not None and args.ctx > MAX_CONTEXT:
        raise UsageError(f"--ctx {args.ctx} is beyond any model's context")
    try:
        report = probe_devices(args.vram, args.ram, cpu_only=args.cpu, gpu=args.gpu)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    require_rpc_servers(report)
    model = anatomy_of(path)
    projector = None
    media = bool(getattr(args, "image", None) or getattr(args, "audio", None))
    if args.mmproj or media:
        from app.vision import projector_for

        projector = projector_for(
            path, model, args.mmproj, args.image_max_tokens, sees=bool(args.image), hears=bool(args.audio)
        )
    choice = choice_of(args, projector)
    if choice.fixed and choice.min_speed is not None:
        raise UsageError("--min-speed is a wish for the solver: leave out --ngl, --ctv, --ubatch, --batch ... with it")
    if args.margin is not None:
        choice = dataclasses.replace(choice, margins={d.name: args.margin for d in report.gpus})
    try:
        result = plan_model(model, report.gpus, report.host, choice)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return path, model, report, result, choice.fixed


def anatomy_of(path: str) -> ModelAnatomy:
    """The model's anatomy: a local file's from the header cache, a remote one's (hf:..., an URL) by
    range reads of its header (app.sources)."""
    from app.sources.refs import is_remote

    if not os.path.exists(path) and is_remote(path):
        from app import sources

        return sources.load_anatomy(sources.resolve_source(path))
    from app.header_cache import load_anatomy_cached

    return load_anatomy_cached(path)


def require_rpc_servers(report: DeviceReport) -> None:
    """Plans and one-shot answers are for the devices asked for: a server that cannot be reached is an error."""
    from app.rpc.endpoint import configured_endpoints

    if report.simulated:
        return
    missing = [w for w in report.warnings if w.startswith("RPC server")]
    if missing and configured_endpoints():
        raise VramchatError(missing[0] + " (--rpc none plans without RPC servers)")
