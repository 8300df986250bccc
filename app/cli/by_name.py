"""`vramchat hf:ORG/REPO:QUANT` (or ORG/REPO:QUANT, a hub URL, any GGUF URL), in the app or with -p: the
copy downloaded before is what runs. A model not on this machine is planned first, as `--plan` plans
it from its header, then offered for download on a terminal ("Download 241 MiB to FOLDER? [y/N]",
with progress; Ctrl+C keeps what arrived, to resume); without a terminal to ask on, it is refused with
the command that downloads it.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from app.cli.exits import EXIT_BAD_FILE, EXIT_CANCELLED, fail


def use_local_copy(args: argparse.Namespace) -> int | None:
    """Point `args.model` at the model's copy on this machine (downloading it when the user says so);
    returns the exit status to stop with, or None to go on with the local file."""
    from app.sources import resolve_source
    from app.sources.download import check_room, plan_download
    from app.sources.downloaded import downloaded_copy
    from planner.hardware import format_size

    source = resolve_source(args.model)
    found = downloaded_copy(source)
    if found is not None:
        args.model = str(found)
        return None
    plan = plan_download(source)
    command = f"vramchat --download {shlex.quote(args.model)}"
    if not sys.stdin.isatty():
        return fail(
            f"{source.ref} is not on this machine ({format_size(plan.needed)} to download): run `{command}` "
            "first, or this command in a terminal to be asked",
            EXIT_BAD_FILE,
        )
    _ctrl_c_stops_it()
    _show_plan(args)
    check_room(source, plan)
    folder = plan.model_path.parent
    if not _yes(f"Download {format_size(plan.needed)} to {folder}? [y/N] "):
        print(f"vramchat: not downloaded (later: {command})", file=sys.stderr)
        return EXIT_CANCELLED
    from app.cli.remote import download_shown

    result = download_shown(source)
    if result is None:
        return EXIT_CANCELLED
    print(f"vramchat: downloaded {result.model_path}", file=sys.stderr)
    args.model = str(result.model_path)
    return None


def _ctrl_c_stops_it() -> None:
    """Ctrl+C stops the question and the download that follows, even where this command was started with
    SIGINT ignored (a parent that ignores it passes that on): it asks in the terminal's foreground."""
    import os
    import signal

    try:
        foreground = os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except OSError:  # not this process's controlling terminal: no shell's job control to respect
        foreground = True
    if foreground:  # a background job keeps SIGINT ignored, as its shell set it
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _show_plan(args: argparse.Namespace) -> None:
    """The plan of the remote model from its header (nothing downloaded), on stderr: stdout is -p's answer."""
    from app.cli.command_plan import make_plan
    from planner.report import plan_to_table

    words = argparse.Namespace(**{**vars(args), "image": [], "audio": [], "mmproj": None})
    _path, _report, planned, _fixed = make_plan(words)  # the projector comes with the download
    print(plan_to_table(planned.fit), file=sys.stderr)
    if planned.speed is not None:
        print(f"\n{planned.speed.text()}\n", file=sys.stderr)


def _yes(question: str) -> bool:
    sys.stderr.write(question)
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
