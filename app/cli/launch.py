"""`vramchat [MODEL]`: the Textual app, started under its guardian once MODEL and the what-if devices are
known to be sound (one clear error before the terminal is taken over)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from app.cli.command_plan import command_choice, refused_as_usage, resolve_model
from app.errors import UsageError, VramchatError

if TYPE_CHECKING:
    import argparse

    from app.tui.services import AppOptions


def run_app(args: argparse.Namespace) -> int:
    """The Textual app: the picker, or MODEL planned and loaded."""
    from app.tui.guard import run_guarded

    options = app_options(args)

    def run() -> int:
        import app.tui

        return app.tui.run(options)

    return run_guarded(run)


def app_options(args: argparse.Namespace) -> AppOptions:
    """What the app starts with: every knob the command line gave, as one choice (--plan and -p read it the
    same way), the sampling it asked for new chats, MODEL read once. UsageError names a knob the app cannot
    take; VramchatError (a folder, a model that does not chat) is said before the terminal is taken over."""
    from app.cli.prompt import asked_sampling
    from app.settings import load_settings
    from app.tui.services import AppOptions

    if args.verify:
        raise UsageError("--verify goes with --plan (the app asks llama.cpp's dry run before every load)")
    choice = command_choice(args)
    if args.mmproj and not args.model:
        raise UsageError("--mmproj goes with a MODEL (in the app, a model's projector beside it is found by itself)")
    model, anatomy = None, None
    if args.model:
        model = resolve_model(args.model, models_dirs=args.models_dir)
        if os.path.isdir(model):
            raise VramchatError(
                f"{model}: is a folder, not a model; to list the models in it: vramchat --models-dir {model}"
            )
        from app.planning import check_choice, read_anatomy
        from planner.archs import not_for_chat

        # missing, unreadable, not GGUF or not a chat model: one clear error before the app starts (the
        # header read once: the picker plans from this reading)
        anatomy = read_anatomy(model)
        with refused_as_usage():  # knobs llama.cpp refuses together: said now, not in the picker
            check_choice(anatomy, choice)
        if args.mmproj:
            from app.vision import projector_for

            projector_for(model, anatomy, args.mmproj, args.image_max_tokens, sees=False, hears=False)
        why_not = not_for_chat(anatomy.architecture)
        if why_not:
            raise VramchatError(
                f"{model}: {anatomy.name or anatomy.architecture} is {why_not}; "
                f"vramchat --plan {model} shows its memory"
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
    return AppOptions(
        model=model,
        models_dirs=list(args.models_dir),
        vram=args.vram,
        ram=args.ram,
        cpu=args.cpu,
        gpu=list(args.gpu),
        continue_chat=args.continue_chat or (not args.model and load_settings()[0].continue_last_chat),
        choice=choice,
        anatomy=anatomy,
        mmproj=args.mmproj,
        image_max_tokens=args.image_max_tokens,
        elastic=args.elastic,
        sampling=asked_sampling(args),
    )
