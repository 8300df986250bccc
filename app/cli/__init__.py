"""Command line: `vramchat` (the app), `vramchat MODEL`, `--plan MODEL`, `--list`, `--devices`.

`--plan`, `--list` and `--devices` never import Textual or llama_cpp: they read
GGUF headers and probe devices through ctypes, so they answer in a fraction of a second.

Exit status: 0 the plan fits, 3 it does not, 2 usage error, 1 bad or missing file.
"""

from __future__ import annotations

import json
import os
import sys

from app import __version__
from app.command_plan import make_plan as _make_plan
from app.command_plan import resolve_model as _resolve_model
from app.errors import UsageError, VramchatError
from planner import LLAMA_CPP_BUILD

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a replayed plan's start is short)
if TYPE_CHECKING:  # argparse is imported when the command line is parsed: a replayed plan needs none of it
    import argparse
    from collections.abc import Sequence


EXIT_OK, EXIT_BAD_FILE, EXIT_USAGE, EXIT_NO_FIT, EXIT_LOAD_FAILED = 0, 1, 2, 3, 4
EXIT_STDOUT_CLOSED = 141  # as a shell reports a command ended by SIGPIPE


def _whole_number(text: str, minimum: int) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        rule = f"must be at least {minimum}" if minimum else "must not be negative"
        raise argparse.ArgumentTypeError(f"{value} {rule}")
    return value


def _positive_int(text: str) -> int:
    return _whole_number(text, 1)


def _non_negative_int(text: str) -> int:
    return _whole_number(text, 0)


def _on_off(text: str) -> bool:
    import argparse

    lowered = text.lower()
    if lowered in ("on", "1", "true", "yes"):
        return True
    if lowered in ("off", "0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r}: use on or off")


def _size(text: str) -> int:
    import argparse

    from planner.hardware import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from app.speed import tokens_per_second

    p = argparse.ArgumentParser(
        prog="vramchat",
        description="Chat with local GGUF models, knowing before you load one how much memory it takes.",
        epilog="Sizes accept binary units: 8GiB, 24G, 12000MiB. "
        "Simulate devices for the whole app with VRAMCHAT_DEVICES (see --devices).",
    )
    p.add_argument("model", nargs="?", help="a .gguf file (the first shard of a split model), or 'demo'")
    p.add_argument("--version", action="version", version=f"vramchat {__version__} ({LLAMA_CPP_BUILD})")

    modes = p.add_argument_group("what to do")
    modes.add_argument("--plan", action="store_true", help="print the memory plan for MODEL and exit")
    modes.add_argument(
        "--list",
        action="store_true",
        help="print the models the picker would list, with their fit on this machine, and exit",
    )
    modes.add_argument(
        "--quants",
        action="store_true",
        help="plan every GGUF of MODEL, a Hugging Face repo (ORG/REPO) or a folder, and print one table: "
        "each quant's fit on this machine and the best choice",
    )
    modes.add_argument(
        "--download",
        action="store_true",
        help="download MODEL (hf:ORG/REPO:QUANT, ORG/REPO/FILE.gguf or an URL) and its projector into the "
        "models folder: resumed if interrupted, checked against the hub's sha256",
    )
    modes.add_argument("--devices", action="store_true", help="print what each device probe found and exit")
    modes.add_argument("--json", action="store_true", help="with --plan, --list or --devices: print JSON")
    modes.add_argument(
        "--forget-overhead",
        action="store_true",
        help="forget the GPU overhead vramchat learned on this machine's loads (--devices shows it) and exit",
    )
    modes.add_argument(
        "--llama-args",
        action="store_true",
        help="with --plan: print the flags that run this configuration in llama-server or llama-cli",
    )
    modes.add_argument(
        "-p",
        "--prompt",
        metavar="TEXT",
        help="plan and load MODEL, answer TEXT on stdout and exit (with --json: one object)",
    )
    modes.add_argument(
        "--temp",
        type=float,
        metavar="T",
        help="with -p: sampling temperature (default: the setting; unset: greedy for a base model, 0.2 for chat)",
    )
    modes.add_argument(
        "-n",
        "--n-predict",
        type=_positive_int,
        metavar="N",
        help="with -p: most tokens in the answer (default: the setting, 512)",
    )
    modes.add_argument(
        "--verify",
        action="store_true",
        help="with --plan: confirm the plan with llama.cpp's own dry run on this machine (about 1 s)",
    )
    modes.add_argument(
        "--models-dir",
        action="append",
        default=[],
        metavar="FOLDER",
        help="also look for models in FOLDER (repeat for several)",
    )

    devs = p.add_argument_group("devices (what-if planning)")
    devs.add_argument(
        "--vram", metavar="SIZE[,SIZE...]", help="plan for simulated GPUs with these sizes instead of this machine's"
    )
    devs.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="CARD",
        help='plan for a card you do not have, from vramchat\'s table: --gpu "RTX 4090" (repeat for several, '
        '"2x RTX 3090" for two; --gpu list shows the table)',
    )
    devs.add_argument("--ram", metavar="SIZE", help="plan for this much host RAM")
    devs.add_argument("--margin", metavar="SIZE", type=_size, help="memory to keep free on each GPU (default 256MiB)")
    devs.add_argument("--cpu", action="store_true", help="plan for the host alone (no GPU)")
    devs.add_argument(
        "--rpc",
        metavar="HOST:PORT[,...]",
        help="also use the devices these llama.cpp RPC servers lend (`vramchat serve-rpc` on the other machine); "
        "default: the settings' rpc_servers; --rpc none uses none",
    )

    wish = p.add_argument_group("wishes (the solver honours them)")
    wish.add_argument(
        "--ctx",
        type=_non_negative_int,
        metavar="N",
        help="context length in tokens (default: the trained context, at most 32768)",
    )
    wish.add_argument(
        "--min-speed",
        type=tokens_per_second,
        metavar="N",
        help="prefer a configuration predicted to decode at least N tokens/s at the start of a chat",
    )
    wish.add_argument("--mmproj", metavar="FILE", help="a vision/audio projector (mmproj .gguf) loaded beside MODEL")
    wish.add_argument(
        "--image-max-tokens",
        type=_positive_int,
        metavar="N",
        help="with --mmproj or --image: the most tokens one image may take, as llama-server's flag "
        "(default: the projector's); a larger image is scaled down",
    )
    modes.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="FILE",
        help="with -p: show the model this picture (repeat for several); the projector beside MODEL is "
        "loaded, or the one --mmproj names",
    )
    modes.add_argument(
        "--audio",
        action="append",
        default=[],
        metavar="FILE",
        help="with -p: let the model hear this sound (WAV, MP3, FLAC), for projectors with an audio encoder",
    )
    wish.add_argument(
        "--elastic",
        type=_on_off,
        metavar="on|off",
        help="start with a small context and grow it with the conversation (default: the elastic_context setting, on)",
    )
    wish.add_argument(
        "--repack",
        type=_on_off,
        metavar="on|off",
        help="the CPU's extra buffer types for host weights (CPU_REPACK, AMX; llama.cpp's --repack); "
        "default on, off on CPUs with AMX",
    )

    fixed = p.add_argument_group("fixed configuration (evaluated as given, no solver)")
    fixed.add_argument("--ngl", type=int, metavar="N", help="GPU layers, output layer included (-1: all)")
    fixed.add_argument("--ctk", metavar="TYPE", help="K cache type: f16, q8_0, q4_0, ...")
    fixed.add_argument("--ctv", metavar="TYPE", help="V cache type (quantized V needs --fa on)")
    fixed.add_argument("--fa", choices=("on", "off", "auto"), help="flash attention")
    fixed.add_argument("--ubatch", type=_positive_int, metavar="N", help="micro-batch size (default 512)")
    fixed.add_argument("--batch", type=_positive_int, metavar="N", help="batch size (default 512)")
    fixed.add_argument("--swa-full", type=_on_off, metavar="on|off", help="full-size sliding-window cache")
    fixed.add_argument("--parallel", type=_positive_int, metavar="N", help="parallel sequences (default 1)")
    fixed.add_argument(
        "--n-cpu-moe",
        type=_non_negative_int,
        metavar="N",
        help="keep the experts of the first N layers in host memory (MoE models)",
    )
    return p


def _fail(message: str, code: int) -> int:
    print(f"vramchat: error: {message}", file=sys.stderr)
    return code


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
        if replay_key is not None and confirmed is None:
            from app.plan_replay import keep

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
    from planner.errors import PlannerError
    from planner.fit import evaluate

    try:
        full = evaluate(model, plan.config.with_(n_gpu_layers=model.n_layer + 1), report.gpus, report.host).plan
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


def run_prompt(args: argparse.Namespace) -> int:
    """`vramchat MODEL -p TEXT`: plan, load (in the engine process, after llama.cpp's dry run), stream the
    answer to stdout, exit. With --json, one object: the answer, its speed and the memory per device."""
    import threading

    from app.chat import ChatError
    from app.engine import EngineError, GenerationParams
    from app.engine.templates import ChatMessage
    from app.reply import OK, write_reply
    from app.sampling import temperature_for
    from app.session import LoadFailed, ModelSession
    from app.settings import load_settings
    from planner.archs import not_for_chat

    if not args.prompt.strip():
        raise UsageError("-p needs a question")
    attached = _attached(args)  # a missing or unreadable file, or no picture: said before anything loads
    path, report, planned, _fixed = _make_plan(args)
    model, result = planned.anatomy, planned.fit
    why_not = not_for_chat(model.architecture)
    if why_not:
        return _fail(f"{path}: {model.name or model.architecture} is {why_not}", EXIT_BAD_FILE)
    if not result.plan.fits:
        return _fail(
            f"the model does not fit this machine: {'; '.join(result.reasons)} "
            f"(vramchat --plan {args.model} says more)",
            EXIT_NO_FIT,
        )
    settings, _warning = load_settings()
    session = ModelSession(elastic=settings.elastic_context if args.elastic is None else args.elastic)
    try:
        try:
            loaded = session.load(path, model, result, report)
        except (LoadFailed, EngineError) as exc:
            return _fail(f"the model did not load: {exc}", EXIT_LOAD_FAILED)
        params = GenerationParams(
            max_tokens=args.n_predict or settings.max_tokens,
            temperature=temperature_for(settings.temperature if args.temp is None else max(args.temp, 0.0), loaded.fmt),
            stop=loaded.fmt.stop,
        )
        stream = not args.json
        started: list[bool] = []

        def piece(text: str) -> None:
            if stream:
                if not started:  # the reply as the chat shows it: no leading blank
                    text = text.lstrip()
                    if not text:
                        return
                    started.append(True)
                sys.stdout.write(text)
                sys.stdout.flush()

        shelf = None
        if attached:
            from app.media import MediaShelf, pixel_limit

            shelf = MediaShelf(pixel_limit(loaded.projector))
            for a, file in attached:
                shelf.add(a, file)
        told: set[str] = set()

        def fitted(build) -> None:
            if build.note:
                print(f"vramchat: {build.note}", file=sys.stderr)
            for media_id, scaled in (shelf.scaled if shelf else {}).items():
                if media_id not in told:  # a larger image is scaled down, never an out-of-memory
                    told.add(media_id)
                    print(f"vramchat: {scaled.describe()}", file=sys.stderr)

        outcome = write_reply(
            session,
            None,
            0,
            [ChatMessage("user", args.prompt, tuple(a.id for a, _ in attached))],
            settings.system_prompt,
            params,
            [g.name for g in report.gpus],
            threading.Event(),
            on_fitted=fitted,
            on_piece=piece,
            media=shelf,
        )
        if stream:
            sys.stdout.write("\n")
        if outcome.kind != OK:
            return _fail(outcome.error or "the reply failed", EXIT_LOAD_FAILED)
        if args.json:
            data = _answer_json(session, outcome)
            if attached:
                data["images"] = _images_json(attached, shelf, session)
            print(json.dumps(data, indent=2))
        return EXIT_OK
    except ChatError as exc:
        return _fail(str(exc), EXIT_USAGE)
    finally:
        session.close()


def _attached(args: argparse.Namespace) -> list:
    """The files of --image and --audio, checked (list of (Attachment, Path)); MediaError says what is wrong."""
    from pathlib import Path

    from app.media import inspect

    out = []
    for file, kind in [*((f, "image") for f in args.image), *((f, "audio") for f in args.audio)]:
        a = inspect(file)
        if a.kind != kind:
            what = "a sound: give it with --audio" if a.kind == "audio" else "a picture: give it with --image"
            raise UsageError(f"{file} is {what}")
        out.append((a, Path(os.path.expanduser(file))))
    return out


def _images_json(attached: list, shelf, session) -> list[dict]:
    """Each picture or sound sent: its size, the size the model was shown, and the tokens it became."""
    encoded = {e.id: e for e in getattr(session.engine, "encoded", [])}
    out = []
    for a, _file in attached:
        scaled = shelf.scaled.get(a.id) if shelf else None
        event = encoded.get(a.id)
        out.append(
            {
                "name": a.name,
                "kind": a.kind,
                "bytes": a.size,
                "width": a.width,
                "height": a.height,
                "sent": list(scaled.after) if scaled else [a.width, a.height],
                "scaled": scaled is not None,
                "tokens": event.tokens if event else None,
                "encode_seconds": round(event.seconds, 3) if event else None,
            }
        )
    return out


def _projector_json(model) -> dict | None:
    """The projector's buffers: planned beside what libmtmd allocated (exact once an image has been encoded)."""
    from app.engine.llama_log import device_of

    if model.projector is None:
        return None
    gpus = [d.name for d in model.plan.gpus]
    m = model.report.measurements
    out: dict = {"path": model.projector.path, "type": model.projector.projector_type}
    for kind, measured in (("projector_weights", m.projector_weights), ("projector_compute", m.projector_compute)):
        planned = {b.device: b.bytes for b in model.plan.buffers if b.kind == kind}
        allocated: dict[str, int] = {}
        for name, size in measured.items():
            where = device_of(name, gpus)
            allocated[where] = allocated.get(where, 0) + size
        out[kind.removeprefix("projector_")] = {"planned": planned, "allocated": allocated or None}
    return out


def _answer_json(session, outcome) -> dict:
    """The one-shot answer with its speed, and memory per device: planned (for what is allocated now),
    allocated (llama.cpp's log), the KV cache committed and in use."""
    from app.engine.planned_actual import compare
    from app.telemetry import kv_bytes_in_use

    model = session.model
    plan, now = model.plan, model.now
    allocated: dict[str, int] = {}
    kv_committed: dict[str, int] = {}
    for row in compare(now, model.report.measurements):
        if not row.measured:
            continue
        allocated[row.device] = allocated.get(row.device, 0) + row.measured
        if row.kind in ("kv", "kv_swa"):
            kv_committed[row.device] = kv_committed.get(row.device, 0) + row.measured
    cells = session.engine.kv_cells_used()
    stats = outcome.stats
    return {
        "answer": outcome.text,
        "stopped_by": stats.stopped_by,
        "prompt_tokens": stats.prompt_tokens,
        "tokens": stats.generated_tokens,
        "tokens_per_second": round(stats.tokens_per_second, 2),
        "config": now.config.to_json(),
        "max_ctx": model.max_ctx,
        "memory": {
            "planned": {**{d.name: d.planned for d in now.gpus}, "CPU": now.host.planned},
            "allocated": allocated,
            "kv_committed": kv_committed,
            "kv_in_use": {"cells": cells, "bytes": kv_bytes_in_use(plan.kv, cells)},
        },
        "projector": _projector_json(model),
    }


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
    from app.engine.verify import confirm_plan, replan

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
            (lambda g, h: replan(model, result.plan, g, h)) if solved else (lambda g, h: None),
        )
    finally:
        engine.close()


def run_list(args: argparse.Namespace) -> int:
    from app.catalog import Catalog, table_rows
    from app.devices import probe_devices
    from app.devices.render import device_line
    from app.discovery import folders_to_scan
    from app.settings import load_settings
    from app.speed import list_speed

    settings, warning = load_settings()
    if warning:
        print(f"Warning: {warning}", file=sys.stderr)
    try:
        report = probe_devices(args.vram, args.ram, cpu_only=args.cpu, gpu=args.gpu)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    folders = folders_to_scan(args.models_dir, settings.models_dirs, settings.scan_known_caches)
    catalog = Catalog(report.gpus, report.host)
    entries = catalog.complete(catalog.scan(folders, _demo_for_list()))
    if args.json:
        print(
            json.dumps(
                {
                    "folders": [{"path": str(f.path), "source": f.source} for f in folders],
                    "models": [
                        {
                            "path": e.file.path,
                            "source": e.file.source,
                            "size": e.file.size,
                            "shards": e.file.shards,
                            "missing_shards": e.file.missing_shards,
                            "projectors": e.file.projectors,
                            "demo": e.file.is_demo,
                            **(
                                {k: v for k, v in e.summary.to_json().items() if not k.startswith("speed_")}
                                if e.summary
                                else {}
                            ),
                            "speed": list_speed(e, report.gpus),
                        }
                        for e in entries
                    ],
                    "warnings": report.warnings,
                },
                indent=2,
            )
        )
        return EXIT_OK
    if not entries:
        print("No GGUF models found in: " + ", ".join(str(f.path) for f in folders))
        return EXIT_OK
    header = ("model", "arch", "params", "quant", "size", "fit on this machine", "decode (start)", "path")
    rows = [header, *table_rows(entries, report.gpus)]
    widths = [min(max(len(r[i]) for r in rows), 48) for i in range(len(header) - 1)]
    for row in rows:
        cells = [(c if len(c) <= w else c[: w - 1] + "…").ljust(w) for c, w in zip(row, widths)]
        print("  ".join([*cells, row[-1]]).rstrip())
    print(f"\nPlanned for: {device_line(report)}")
    estimated = [e.summary for e in entries if e.summary and not e.summary.exact and e.summary.verdict]
    notes = []
    if any(not s.checked for s in estimated):
        notes.append("estimate: no exact rules for the architecture yet (the picker has llama.cpp's dry run check it)")
    if any(s.checked for s in estimated):
        notes.append("checked: llama.cpp's dry run confirmed the plan on this machine")
    if notes:
        print("\n" + "\n".join(notes))
    for warning in report.warnings:
        print(f"\nWarning: {warning}")
    return EXIT_OK


def _demo_for_list():
    from app.demo import DemoUnavailable, demo_installed, demo_model_path

    if not demo_installed():
        return None
    try:
        return demo_model_path()
    except DemoUnavailable as exc:
        print(f"Warning: {exc}", file=sys.stderr)
        return None


def run_app(args: argparse.Namespace) -> int:
    """The Textual app: the picker, or MODEL planned and loaded."""

    model = None
    if args.model:
        model = _resolve_model(args.model)
        if os.path.isdir(model):
            return _fail(
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
            return _fail(
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
    from app.tui.guard import run_guarded

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
            )
        )

    return run_guarded(run)


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


def _negative_values_attached(argv: Sequence[str]) -> list[str]:
    """`--vram -3GiB` reads to argparse as two options; attach the value so that the
    flag's own check answers ("size must be positive") instead of "expected one argument"."""
    out: list[str] = []
    for arg in argv:
        if (
            out
            and out[-1].startswith("--")
            and "=" not in out[-1]
            and len(arg) > 1
            and arg[0] == "-"
            and (arg[1].isdigit() or arg[1] == ".")
        ):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
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
        from app.rpc.serve import serve

        try:
            return serve(words[1:])
        except KeyboardInterrupt:
            return 130
    replay_key = None
    if "--plan" in words and "--json" in words:  # planned before: said again, nothing parsed nor planned
        from app import plan_replay

        replay_key = plan_replay.key_for(words)  # before anything below changes the environment
        if replay_key is not None:
            code = plan_replay.replay(*replay_key, resolve=_resolve_model)
            if code is not None:
                return code
    parser = build_parser()
    args = parser.parse_args(_negative_values_attached(words))
    from app.compute_cache import keep_compute_sizes
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
        if args.gpu and args.vram is not None:
            raise UsageError("--gpu names cards, --vram bare sizes: use one of them")
        if [g for g in args.gpu if g.strip().lower() == "list"]:
            from planner.cards import card_table

            print(card_table())
            return EXIT_OK
        if args.forget_overhead:
            return run_forget_overhead()
        if args.devices:
            return run_devices(args)
        if args.quants or args.download or (args.model and not os.path.exists(args.model) and "/" in args.model):
            from app.remote_cli import handles, run_remote  # --quants, --download, a remote MODEL to load

            if handles(args):
                return run_remote(args)
        if args.plan:
            return run_plan(args, replay_key)
        if args.prompt is not None:
            return run_prompt(args)
        if args.list:
            return run_list(args)
        if args.json:
            raise UsageError("--json goes with --plan, --list, --devices or -p")
        if args.llama_args:
            raise UsageError("--llama-args goes with --plan")
        return run_app(args)
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        return _fail(str(exc), EXIT_USAGE)
    except GGUFError as exc:
        return _fail(str(exc), EXIT_BAD_FILE)
    except PlannerError as exc:
        return _fail(str(exc), EXIT_BAD_FILE)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # not a fault: main() ends quietly
    except VramchatError as exc:  # a message meant for the user (the demo missing, a store that fails ...)
        return _fail(str(exc), EXIT_BAD_FILE)
    except Exception as exc:
        return _fail(f"unexpected {type(exc).__name__}: {exc} (please report this)", EXIT_BAD_FILE)
    finally:
        use_store(None)


if __name__ == "__main__":
    sys.exit(main())
