"""`vramchat serve MODEL [plan knobs] [--host ADDR] [--port N] [--api-key KEY] [--parallel N]`: the model
planned as `--plan` and `-p` plan it, loaded in the engine process as the chat loads it, served behind an
OpenAI-compatible API (app/serve/) until Ctrl+C or SIGTERM.

On stderr, the plan first (as `--plan` prints it), then what the load changed; on stdout, one line when the
server is ready (its `http://HOST:PORT/v1`) and one line per request.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

from app.cli.exits import EXIT_BAD_FILE, EXIT_LOAD_FAILED, EXIT_NO_FIT, EXIT_OK, fail
from app.errors import UsageError

if TYPE_CHECKING:
    import argparse

# the command line's modes that are not serving: refused with serve, never dropped (kept out of its help)
_OTHER_MODES = {
    "plan": "--plan",
    "list": "--list",
    "quants": "--quants",
    "download": "--download",
    "continue_chat": "--continue",
    "devices": "--devices",
    "json": "--json",
    "forget_overhead": "--forget-overhead",
    "llama_args": "--llama-args",
    "verify": "--verify",
}


def serve_parser() -> argparse.ArgumentParser:
    """MODEL, the server's sampling defaults, every plan knob and the server's own flags. The app's modes and
    -p's flags are parsed but not shown: `_check` refuses them in words."""
    from app.cli.parser import add_modes, add_one_question, add_plan_knobs, add_sampling, command_parser
    from app.serve.options import DEFAULT_HOST, DEFAULT_PORT, KEY_ENV

    parser = command_parser(
        "vramchat serve",
        "Serve MODEL, planned and loaded as the app loads it, behind an OpenAI-compatible API "
        "(/v1/chat/completions, /v1/completions, /v1/models, /health, /metrics).",
        "Sizes accept binary units: 8GiB, 24G, 12000MiB. vramchat --help shows the app's own command line "
        "(the picker, --plan, -p ...); vramchat serve-rpc --help the RPC server that lends this machine's devices.",
    )
    group = parser.add_argument_group("serving")
    group.add_argument(
        "--host",
        default=DEFAULT_HOST,
        metavar="ADDR",
        help=f"address to listen on (default {DEFAULT_HOST}; any other needs a key)",
    )
    group.add_argument(
        "--port", type=_port, metavar="N", help=f"port (default {DEFAULT_PORT}, else the next free one; 0: any)"
    )
    group.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"the key every request must send as 'Authorization: Bearer KEY' (or {KEY_ENV})",
    )
    sampling = parser.add_argument_group("sampling (the server's defaults: what a request sets comes first)")
    add_sampling(sampling, "", "(default: the setting; unset: greedy for a base model, 0.2 for chat)")
    hidden = parser.add_argument_group()
    add_modes(hidden, shown=False)
    add_one_question(hidden, shown=False)
    add_plan_knobs(parser)
    return parser


def _port(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("a port is between 1 and 65535 (0: one the system picks)")
    return value


def run_serve(words: list[str]) -> int:
    from app.cli import _use_rpc_servers
    from app.cli.parser import negative_values_attached

    parser = serve_parser()
    args = parser.parse_args(negative_values_attached(words))
    from app.caches.compute import keep_compute_sizes
    from app.cli.exits import EXIT_USAGE
    from app.errors import VramchatError
    from planner.errors import PlannerError

    keep_compute_sizes()
    try:
        _check(args)
        _use_rpc_servers(args.rpc)
        return _serve(args)
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        return fail(str(exc), EXIT_USAGE)
    except PlannerError as exc:  # a file that is no model, or a broken one
        return fail(str(exc), EXIT_BAD_FILE)
    except VramchatError as exc:
        return fail(str(exc), EXIT_BAD_FILE)
    except KeyboardInterrupt:
        return 130


def _check(args: argparse.Namespace) -> None:
    from app.serve.options import api_key_from, check_exposure

    if not args.model:
        raise UsageError("vramchat serve needs a MODEL (a .gguf file, 'demo', hf:ORG/REPO:QUANT or a listed name)")
    for name, flag in _OTHER_MODES.items():
        if getattr(args, name, None):
            raise UsageError(f"{flag} is a mode of its own: vramchat serve takes a MODEL and plan knobs")
    if args.prompt is not None or args.image or args.audio or args.verbose:
        raise UsageError(
            "-p, --image, --audio and --verbose answer one question; with serve, send requests to the server"
        )
    if args.models_dir:
        raise UsageError("--models-dir is where the picker and --list look; vramchat serve takes a MODEL itself")
    args.api_key = api_key_from(args.api_key)
    check_exposure(args.host, args.api_key)


def _serve(args: argparse.Namespace) -> int:
    from app.cli.command_plan import make_plan
    from app.cli.prompt import _tell_retry, asked_sampling
    from app.conversation.sampling import user_defaults
    from app.engine import EngineError
    from app.serve.options import ServeOptions
    from app.serve.runner import Defaults
    from app.serve.server import Server
    from app.session import LoadFailed, ModelSession
    from app.settings import load_settings
    from app.terminal_text import terminal_safe
    from planner.archs import not_for_chat
    from planner.report import plan_to_table

    signal.signal(signal.SIGTERM, _interrupt)  # until uvicorn's own handler: the engine is closed either way
    asked = args.model
    if "/" in args.model and not os.path.exists(args.model):
        from app.cli.remote import loads_remote

        if loads_remote(args):
            from app.cli.by_name import use_local_copy

            code = use_local_copy(args)
            if code is not None:
                return code
    path, report, planned, _fixed = make_plan(args)
    model, result = planned.anatomy, planned.fit
    print(terminal_safe(plan_to_table(result), multiline=True), file=sys.stderr)
    why_not = not_for_chat(model.architecture)
    if why_not:
        return fail(
            f"{terminal_safe(path)}: {terminal_safe(model.name or model.architecture)} is {why_not}", EXIT_BAD_FILE
        )
    if not result.plan.fits:
        return fail(
            f"the model does not fit this machine: {'; '.join(result.reasons)} "
            f"(vramchat --plan {terminal_safe(asked)} says more)",
            EXIT_NO_FIT,
        )
    parallel = result.plan.config.n_seq_max
    settings, _warning = load_settings()
    elastic = settings.elastic_context if args.elastic is None else args.elastic
    if parallel > 1 and elastic:
        elastic = False  # N sequences share the context as planned: it is loaded whole
        print(
            f"vramchat: {parallel} parallel slots: the whole context is loaded at once (it does not grow)",
            file=sys.stderr,
        )
    session = ModelSession(elastic=elastic)
    server = None
    try:
        try:
            loaded = session.load(path, model, result, report, on_retry=_tell_retry, reprobe=lambda: _reprobe(args))
        except (LoadFailed, EngineError) as exc:
            return fail(f"the model did not load: {exc}", EXIT_LOAD_FAILED)
        if loaded.changes:
            print(
                f"vramchat: loaded with a smaller plan than the one chosen: {'; '.join(loaded.changes)}",
                file=sys.stderr,
            )
        if loaded.dry_run_message:
            print(f"vramchat: {terminal_safe(loaded.dry_run_message)}", file=sys.stderr)
        defaults = Defaults(asked_sampling(args), user_defaults(settings.temperature, settings.max_tokens))
        options = ServeOptions(args.host, args.port, args.api_key, parallel)
        server = Server(session, options, defaults, on_line=_say, reprobe=lambda: _reprobe(args), asked_name=asked)
        if server.port_note:
            print(f"vramchat: {server.port_note}: serving on port {server.port}", file=sys.stderr)
        slots = f", {parallel} parallel slots" if parallel > 1 else ""
        key = ", API key required" if args.api_key else ""
        _say(
            f"vramchat: serving {terminal_safe(server.model_id)} at {server.url} "
            f"(context {loaded.max_ctx:,} tokens{slots}{key}; Ctrl+C stops)"
        )
        server.serve()
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        if server is not None:
            server.close()
        session.close()
        print("vramchat: stopped", file=sys.stderr)


def _say(line: str) -> None:
    print(line, flush=True)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _reprobe(args: argparse.Namespace):  # -> DeviceReport
    from app.cli.command_plan import devices_for

    return devices_for(args)
