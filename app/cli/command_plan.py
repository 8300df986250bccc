"""The plan a command line asks for: its MODEL resolved, its devices probed, its knobs read as
app.planning's rule reads them, the plan made by app.planning.plan_source. `--plan`, `-p` and
`--quants` (app/cli/quant_table.py: the devices probed once for all its models) share it."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from app.errors import UsageError, VramchatError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Iterator

    from app.devices import DeviceReport
    from app.planning import PlanChoice, Planned, ProjectorRule
    from planner.model import ModelAnatomy
    from planner.projector import Projector


def resolve_model(name: str | None, mode: str = "--plan", models_dirs: Iterable[str] = ()) -> str:
    """The file MODEL names: a path, the demo, a model Ollama pulled, a hub or URL reference, or the name of a
    model `vramchat --list` shows (looked up in its folders and `models_dirs`); `mode` is the flag that asked for
    it (said when MODEL is missing)."""
    if not name:
        raise UsageError(f"{mode} needs a MODEL (a .gguf file, or 'demo')")
    from app.demo import DEMO_NAMES, demo_model_path

    if name in DEMO_NAMES:
        return str(demo_model_path())
    if os.path.exists(name):
        return name
    from app.ollama import find_model

    pulled = find_model(name)  # gemma3:270m: a model Ollama has pulled, before a hub's ORG/REPO:QUANT
    if pulled is not None:
        return pulled.model
    if "/" not in name and ":" not in name:
        from app.cli.listed_name import find_listed

        return find_listed(name, models_dirs)
    from app.sources import canonical_ref  # hf:ORG/REPO:QUANT, an URL: the file it names

    return canonical_ref(name)


def choice_of(args: argparse.Namespace) -> PlanChoice:
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
        margin=args.margin,
    )


def make_plan(args: argparse.Namespace) -> tuple[str, DeviceReport, Planned, bool]:
    """The plan for MODEL and the command line's wishes or fixed configuration: (path, device report,
    the plan, whether the configuration was fixed)."""
    from app.planning import plan_source

    mode = "-p" if getattr(args, "prompt", None) is not None else "--plan"
    if not args.model:
        resolve_model(args.model, mode)  # says what is missing before any other check
    check_context(args)
    report = devices_for(args)
    choice = command_choice(args)
    path = resolve_model(args.model, mode, getattr(args, "models_dir", ()))  # after the flags' own checks
    with refused_as_usage():
        planned = plan_source(path, report, choice, projector=projector_rule(path, args, args.mmproj))
    return path, report, planned, choice.fixed


def check_context(args: argparse.Namespace) -> None:
    from app.planning import MAX_CONTEXT

    if args.ctx is not None and args.ctx > MAX_CONTEXT:
        raise UsageError(f"--ctx {args.ctx} is beyond any model's context")


def devices_for(args: argparse.Namespace) -> DeviceReport:
    """The devices a command plans for (what-if sizes, --cpu, --gpu), probed once per command: a probe
    may start a child process, ask NVML and call RPC servers."""
    from app.devices import probe_devices

    try:
        report = probe_devices(args.vram, args.ram, cpu_only=args.cpu, gpu=args.gpu)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    require_rpc_servers(report)
    return report


def command_choice(args: argparse.Namespace) -> PlanChoice:
    """The command line's knobs as one choice, the same for --plan, -p, serve and the app; knobs that cannot
    go together are a usage error that names them."""
    choice = choice_of(args)
    if choice.fixed and choice.min_speed is not None:
        raise UsageError("--min-speed is a wish for the solver: leave out --ngl, --ctv, --ubatch, --batch ... with it")
    return choice


@contextlib.contextmanager
def refused_as_usage() -> Iterator[None]:
    """Knobs llama.cpp refuses together (planner.errors.ConfigError) are the command line's usage error."""
    from planner.errors import ConfigError

    try:
        yield
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def projector_rule(path: str, args: argparse.Namespace, mmproj: str | None) -> ProjectorRule | None:
    """--mmproj, --image and --audio: the projector they need, or a VisionError that says why there is none."""
    image, audio = getattr(args, "image", None), getattr(args, "audio", None)
    if not (mmproj or image or audio):
        return None

    def required(model: ModelAnatomy) -> tuple[Projector | None, str]:
        from app.vision import projector_for

        return projector_for(path, model, mmproj, args.image_max_tokens, sees=bool(image), hears=bool(audio)), ""

    return required


def require_rpc_servers(report: DeviceReport) -> None:
    """Plans and one-shot answers are for the devices asked for: a server that cannot be reached is an error."""
    from app.rpc.endpoint import configured_endpoints

    if report.simulated:
        return
    missing = [w for w in report.warnings if w.startswith("RPC server")]
    if missing and configured_endpoints():
        raise VramchatError(missing[0] + " (--rpc none plans without RPC servers)")
