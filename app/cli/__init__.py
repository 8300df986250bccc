"""Command line: `vramchat` (the app), `vramchat MODEL`, `--plan MODEL`, `--list`, `--devices`.

This module reads the words and hands them to one mode: app/cli/parser.py the flags, then a module per
mode: plan.py (`--plan`, kept and said again by replay.py), prompt.py (`-p`), serve.py (`vramchat serve`),
serve_rpc.py (`vramchat serve-rpc`), listing.py (`--list`), devices.py (`--devices`, `--forget-overhead`),
quant_table.py (`--quants`), remote.py (`--download`), by_name.py (a remote MODEL to run), launch.py (the app);
command_plan.py is the plan every planning mode asks for.

`--plan`, `--list` and `--devices` never import Textual or llama_cpp: they read
GGUF headers and probe devices through ctypes, so they answer in a fraction of a second.

Exit status: 0 the plan fits, 3 it does not, 2 usage error, 1 bad or missing file.
"""

from __future__ import annotations

import os
import sys

from app.cli.exits import EXIT_BAD_FILE, EXIT_LOAD_FAILED, EXIT_NO_FIT, EXIT_OK, EXIT_STDOUT_CLOSED, EXIT_USAGE, fail
from app.collector import paused, resume
from app.errors import UsageError, VramchatError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a replayed plan's start is short)
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["EXIT_BAD_FILE", "EXIT_LOAD_FAILED", "EXIT_NO_FIT", "EXIT_OK", "EXIT_USAGE", "main"]


def _use_rpc_servers(given: str | None) -> None:
    """--rpc, else the settings' servers, for this process and the ones it starts."""
    from app.rpc.endpoint import RPC_ENV, parse_endpoints, use_endpoints

    if given is None:
        if RPC_ENV in os.environ:
            return
        from app.settings import load_settings

        given = ",".join(load_settings()[0].rpc_servers)
    if given.strip().lower() in ("", "none"):
        use_endpoints([])
        return
    try:
        use_endpoints(parse_endpoints(given))
    except ValueError as exc:
        raise UsageError(f"--rpc: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    with paused():  # a command that prints and exits never collects; one that runs on resumes (app.collector)
        return _guarded_main(argv)


def _guarded_main(argv: Sequence[str] | None) -> int:
    from app.terminal_text import guard_streams

    guard_streams()  # names, paths, errors and answers come from outside: no byte of theirs commands the terminal
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return code
    except BrokenPipeError:  # `vramchat --plan demo | head`: the reader has what it wanted
        # the interpreter flushes stdout again at exit: point it where a flush cannot fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_STDOUT_CLOSED


def _main(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["serve-rpc"]:
        from app.cli.serve_rpc import serve

        resume()
        try:
            return serve(words[1:])
        except KeyboardInterrupt:
            return 130
    if words[:1] == ["serve"]:  # the model behind an OpenAI-compatible API (app/serve/)
        from app.cli.serve import run_serve

        resume()
        return run_serve(words[1:])
    replay_key = None
    if "--plan" in words and "--json" in words:  # planned before: said again, nothing parsed nor planned
        from app.cli import replay
        from app.cli.command_plan import resolve_model

        replay_key = replay.key_for(words)  # before anything below changes the environment
        if replay_key is not None:
            code = replay.replay(*replay_key, resolve=resolve_model)
            if code is not None:
                return code
    from app.cli.parser import build_parser, negative_values_attached

    parser = build_parser()
    args = parser.parse_args(negative_values_attached(words))
    from app.caches.compute import keep_compute_sizes
    from planner.compute_memo import use_store
    from planner.errors import GGUFError, PlannerError

    keep_compute_sizes()
    try:
        _use_rpc_servers(args.rpc)
        for folder in args.models_dir:
            if not os.path.isdir(os.path.expanduser(folder)):
                raise UsageError(f"--models-dir {folder}: no such folder")
        if (args.image or args.audio) and args.prompt is None:
            raise UsageError("--image and --audio go with -p (in the app, /image PATH attaches a picture)")
        if args.image_max_tokens is not None and not (args.mmproj or args.image or args.audio):
            raise UsageError("--image-max-tokens goes with --mmproj or --image")
        if args.continue_chat and (args.plan or args.list or args.devices or args.quants or args.download):
            raise UsageError("--continue opens the app on the last chat: it goes with no other mode")
        if args.verbose and args.prompt is None:
            raise UsageError("--verbose goes with -p (it shows a reasoning model's thoughts on stderr)")
        if args.continue_chat and args.prompt is not None:
            raise UsageError("--continue opens the app on the last chat; -p answers one question without a chat")
        if args.gpu and args.vram is not None:
            raise UsageError("--gpu names cards, --vram bare sizes: use one of them")
        if [g for g in args.gpu if g.strip().lower() == "list"]:
            from planner.cards import card_table

            print(card_table())
            return EXIT_OK
        if args.forget_overhead:
            from app.cli.devices import run_forget_overhead

            return run_forget_overhead()
        if args.devices:
            from app.cli.devices import run_devices

            return run_devices(args)
        if args.quants or args.download:
            from app.cli.remote import run_remote

            if args.download:
                resume()  # minutes of transfers
            return run_remote(args)
        if args.model and not os.path.exists(args.model) and "/" in args.model:
            from app.cli.remote import loads_remote

            resume()  # it may offer a download, then run the app or -p
            if loads_remote(args):  # hf:ORG/REPO:QUANT, an URL: the copy on disk, or the offer to download it
                from app.cli.by_name import use_local_copy

                code = use_local_copy(args)
                if code is not None:
                    return code
        if args.plan:
            from app.cli.plan import run_plan

            return run_plan(args, replay_key)
        if args.prompt is not None:
            from app.cli.prompt import run_prompt

            resume()
            return run_prompt(args)
        if args.list:
            from app.cli.listing import run_list

            return run_list(args)
        if args.json:
            raise UsageError("--json goes with --plan, --list, --devices or -p")
        if args.llama_args:
            raise UsageError("--llama-args goes with --plan")
        from app.cli.launch import run_app

        return run_app(args)
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        return fail(str(exc), EXIT_USAGE)
    except GGUFError as exc:
        return fail(str(exc), EXIT_BAD_FILE)
    except PlannerError as exc:
        return fail(str(exc), EXIT_BAD_FILE)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # not a fault: main() ends quietly
    except VramchatError as exc:  # a message meant for the user (the demo missing, a store that fails ...)
        return fail(str(exc), EXIT_BAD_FILE)
    except Exception as exc:
        return fail(f"unexpected {type(exc).__name__}: {exc} (please report this)", EXIT_BAD_FILE)
    finally:
        use_store(None)


if __name__ == "__main__":
    sys.exit(main())
