"""`vramchat --devices` (what each device probe found) and `--forget-overhead` (the GPU overhead learned)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from app.cli.exits import EXIT_OK
from app.errors import UsageError

if TYPE_CHECKING:
    import argparse


def run_devices(args: argparse.Namespace) -> int:
    from app.devices import probe_devices
    from app.devices.render import devices_text

    try:
        report = probe_devices(args.vram, args.ram, cpu_only=args.cpu, gpu=args.gpu)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return EXIT_OK
    print(devices_text(report))
    return EXIT_OK


def run_forget_overhead() -> int:
    """--forget-overhead: plans go back to the overhead derived from each device."""
    from app.devices.learned_overhead import LearnedStore, summary

    store = LearnedStore()
    gone = store.forget()
    if gone:
        print(f"Forgot the overhead learned on {len(gone)} GPU{'s' if len(gone) > 1 else ''}: {summary(gone)}")
    else:
        print("Nothing learned to forget: no GPU overhead has been recorded on this machine.")
    return EXIT_OK
