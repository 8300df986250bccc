"""The command line's remote-model modes: `--quants ORG/REPO` (app/cli/quant_table.py) and `--download REF`;
a remote MODEL to load is app/cli/by_name.py's (the downloaded copy, or the offer to download it).

`--plan REF` needs nothing here: app/cli/command_plan.py resolves REF (app.sources.canonical_ref) and
app/planning.py reads its header through app/caches/headers.py, which hands remote words to app/sources.
Errors are `VramchatError`s: one line on stderr, exit 1 (2 for usage), as the rest of the command line does.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from app.cli.exits import EXIT_CANCELLED, EXIT_OK
from app.errors import VramchatError
from app.sources.refs import is_remote
from app.terminal_text import write_control

if TYPE_CHECKING:
    import argparse

    from app.sources.download import DownloadResult
    from app.sources.model import ModelSource


def handles(args: argparse.Namespace) -> bool:
    """Whether the command line asks for a mode of this module."""
    return bool(args.quants or args.download)


def loads_remote(args: argparse.Namespace) -> bool:
    """Whether the command line loads a model named by a remote ref (the app, or -p)."""
    wants_load = not (args.plan or args.list or args.devices or args.quants or args.download)
    if not (wants_load and args.model and is_remote(args.model)):
        return False
    from app.ollama import find_model

    return find_model(args.model) is None  # someone/model:tag that Ollama has pulled is on this machine


def run_remote(args: argparse.Namespace) -> int:
    from app.errors import UsageError

    if args.quants and args.download:
        raise UsageError("--quants and --download are two commands: give one")
    if not args.model:
        raise UsageError(f"{'--quants' if args.quants else '--download'} needs a MODEL (ORG/REPO, hf:ORG/REPO:QUANT)")
    if args.quants:
        from app.cli.quant_table import run_quants

        return run_quants(args)
    return run_download(args)


def run_download(args: argparse.Namespace) -> int:
    from app.sources import resolve_source
    from app.sources.download import plan_download
    from planner.hardware import format_size

    source = resolve_source(args.model)
    if not source.is_remote:
        raise VramchatError(f"{args.model}: already on this machine")
    plan = plan_download(source)
    if plan.files:
        print(
            f"Downloading {source.ref}: {format_size(plan.needed)} to {plan.model_path.parent} "
            f"({format_size(plan.free)} free)",
            file=sys.stderr,
        )
    result = download_shown(source)
    if result is None:
        return EXIT_CANCELLED
    if result.from_hf_cache:
        how = " (in the Hugging Face cache, where another tool put it: used there, not copied)"
    elif not plan.files:
        how = " (downloaded before)"
    else:
        how = " (sha256 checked)" if any(f.sha256 for f, _ in plan.files) else ""
    print(f"{result.model_path}{how}")
    if result.projector_path is not None:
        print(f"{result.projector_path}")
    return EXIT_OK


def download_shown(source: ModelSource) -> DownloadResult | None:
    """Download `source` (and its projector) with its progress on stderr; None when Ctrl+C or a cancel
    stopped it (said on stderr: what arrived is kept, to resume)."""
    import threading

    from app.sources.download import Progress, download, format_duration
    from app.sources.errors import Cancelled
    from planner.hardware import format_size

    tty = sys.stderr.isatty()
    last = [-1]
    shown = [False]

    def show(p: Progress) -> None:
        percent = int(p.fraction * 100)
        speed = f"{format_size(int(p.speed))}/s" if p.speed else "…"
        left = format_duration(p.seconds_left) if p.seconds_left is not None else "…"
        line = f"{p.file}: {format_size(p.done)} of {format_size(p.total)} ({percent}%), {speed}, {left} left"
        shown[0] = True
        if tty:
            write_control(sys.stderr, "\r\033[K")
            sys.stderr.write(line)
            sys.stderr.flush()
        elif percent // 10 != last[0] // 10 or p.phase == "done":
            print(line, file=sys.stderr)
        last[0] = percent

    try:
        result = download(source, progress=show, cancel=threading.Event())
    except KeyboardInterrupt:
        if tty:
            sys.stderr.write("\n")
        print("vramchat: download interrupted; what arrived is kept: run it again to resume", file=sys.stderr)
        return None
    except Cancelled as exc:
        print(f"vramchat: {exc}", file=sys.stderr)
        return None
    if tty and shown[0]:
        sys.stderr.write("\n")
    return result
