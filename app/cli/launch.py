"""`vramchat [MODEL]`: the Textual app, started under its guardian once MODEL and the what-if devices are
known to be sound (one clear error before the terminal is taken over)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from app.cli.command_plan import resolve_model
from app.cli.exits import EXIT_BAD_FILE, fail
from app.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from app.tui.services import PlanKnobs

ALL_LAYERS = 9999  # --ngl -1 in the picker's field: more layers than any model has, so every one


def knobs_of(args: argparse.Namespace) -> PlanKnobs:
    """The plan knobs the app's picker has fields for (--ctx, --ctk, --ngl, --fa; --ngl -1: every layer)."""
    from app.tui.services import PlanKnobs

    ngl = getattr(args, "ngl", None)
    return PlanKnobs(
        ctx=str(args.ctx) if getattr(args, "ctx", None) else "",
        kv=getattr(args, "ctk", None) or "auto",
        ngl="" if ngl is None else str(ngl if ngl >= 0 else ALL_LAYERS),
        fa=getattr(args, "fa", None) or "auto",
    )


def run_app(args: argparse.Namespace) -> int:
    """The Textual app: the picker, or MODEL planned and loaded."""

    model = None
    if args.model:
        model = resolve_model(args.model)
        if os.path.isdir(model):
            return fail(
                f"{model}: is a folder, not a model; to list the models in it: vramchat --models-dir {model}",
                EXIT_BAD_FILE,
            )
        from planner.anatomy import load_anatomy
        from planner.archs import not_for_chat
        from planner.gguf import read_gguf

        # missing, unreadable, not GGUF or not a chat model: one clear error before the app starts
        anatomy = load_anatomy(read_gguf(model))
        why_not = not_for_chat(anatomy.architecture)
        if why_not:
            return fail(
                f"{model}: {anatomy.name or anatomy.architecture} is {why_not}; "
                f"vramchat --plan {model} shows its memory",
                EXIT_BAD_FILE,
            )
    if args.gpu:
        from app.devices.what_if import cards_for

        try:
            cards_for(args.gpu)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.vram is not None or args.ram is not None:
        from app.devices.simulated import parse_devices

        try:
            parse_devices(args.vram or "")
            parse_devices(f"ram={args.ram}" if args.ram else "")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    from app.settings import load_settings
    from app.tui.guard import run_guarded

    continue_chat = args.continue_chat or (not args.model and load_settings()[0].continue_last_chat)

    def run() -> int:
        import app.tui
        from app.tui.app import AppOptions

        return app.tui.run(
            AppOptions(
                model=model,
                models_dirs=list(args.models_dir),
                vram=args.vram,
                ram=args.ram,
                cpu=args.cpu,
                gpu=list(args.gpu),
                continue_chat=continue_chat,
                knobs=knobs_of(args),
            )
        )

    return run_guarded(run)
