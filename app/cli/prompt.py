"""`vramchat MODEL -p TEXT`: one answer on stdout (with --json, one object with its speed and memory), the
pictures and sounds of --image and --audio shown to the model."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from app.cli.command_plan import make_plan as _make_plan
from app.cli.exits import EXIT_BAD_FILE, EXIT_LOAD_FAILED, EXIT_NO_FIT, EXIT_OK, EXIT_USAGE, fail
from app.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from app.conversation.sampling import ChatSampling
    from planner.retry import Retry


def run_prompt(args: argparse.Namespace) -> int:
    """`vramchat MODEL -p TEXT`: plan, load (in the engine process, after llama.cpp's dry run), stream the
    answer to stdout, exit. With --json, one object: the answer, its speed and the memory per device."""
    import threading

    from app.conversation.prompt import ChatError
    from app.conversation.reasoning import ReplySplitter
    from app.conversation.reply import OK, write_reply
    from app.conversation.sampling import ChatSampling, reply_sampling, sampling_json, user_defaults
    from app.conversation.templates import ChatMessage
    from app.engine import EngineError
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
        return fail(f"{path}: {model.name or model.architecture} is {why_not}", EXIT_BAD_FILE)
    if not result.plan.fits:
        return fail(
            f"the model does not fit this machine: {'; '.join(result.reasons)} "
            f"(vramchat --plan {args.model} says more)",
            EXIT_NO_FIT,
        )
    settings, _warning = load_settings()
    session = ModelSession(elastic=settings.elastic_context if args.elastic is None else args.elastic)
    try:
        try:
            loaded = session.load(path, model, result, report, on_retry=_tell_retry)
        except (LoadFailed, EngineError) as exc:
            return fail(f"the model did not load: {exc}", EXIT_LOAD_FAILED)
        if loaded.changes:
            print(
                f"vramchat: loaded with a smaller plan than the one chosen: {'; '.join(loaded.changes)}",
                file=sys.stderr,
            )
        params = reply_sampling(
            asked_sampling(args),
            ChatSampling(),
            user_defaults(settings.temperature, settings.max_tokens),
            loaded.anatomy.metadata,
            loaded.fmt,
        )
        stream = not args.json
        started: list[bool] = []
        splitter = ReplySplitter()  # a reasoning model's thoughts apart from its answer
        thought: list[bool] = []

        def piece(text: str) -> None:
            reasoning, text = splitter.feed(text)
            if stream and reasoning and args.verbose:  # the thoughts on stderr, the answer alone on stdout
                if not thought:
                    sys.stderr.write("vramchat: the model's reasoning:\n")
                    thought.append(True)
                sys.stderr.write(reasoning)
                sys.stderr.flush()
            if stream and text:
                if not started:  # the reply as the chat shows it: no leading blank
                    text = text.lstrip()
                    if not text:
                        return
                    if thought:
                        sys.stderr.write("\n")
                    started.append(True)
                sys.stdout.write(text)
                sys.stdout.flush()

        shelf = None
        if attached:
            from app.attachments import MediaShelf, pixel_limit

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
            threading.Event(),
            on_fitted=fitted,
            on_piece=piece,
            media=shelf,
        )
        if stream:
            sys.stdout.write("\n")
        if outcome.kind != OK:
            return fail(outcome.error or "the reply failed", EXIT_LOAD_FAILED)
        if args.json:
            data = _answer_json(session, outcome)
            data["sampling"] = sampling_json(params)
            if attached:
                data["images"] = _images_json(attached, shelf, session)
            print(json.dumps(data, indent=2))
        return EXIT_OK
    except ChatError as exc:
        return fail(str(exc), EXIT_USAGE)
    finally:
        session.close()


def asked_sampling(args: argparse.Namespace) -> ChatSampling:
    """The sampling the command line asked for (--temp, -n, --top-p ...); unset values are left to the rule."""
    from app.conversation.sampling import ChatSampling

    return ChatSampling(
        temperature=None if args.temp is None else max(args.temp, 0.0),
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repeat_penalty=args.repeat_penalty,
        seed=args.seed,
        max_tokens=args.n_predict,
    )


def _tell_retry(retry: Retry | None, why: str) -> None:
    """A load that failed and is tried again, said on stderr (the answer stays alone on stdout)."""
    from app.conversation.recovery import retry_words

    if retry is None:  # a crash in the CPU's extra buffer types: the same plan without them
        print(f"vramchat: {why}", file=sys.stderr)
    else:
        words = retry_words(why, retry.changes).replace("\n", ". ")  # one line
        print(f"vramchat: not enough memory: {words}", file=sys.stderr)


def _attached(args: argparse.Namespace) -> list:
    """The files of --image and --audio, checked (list of (Attachment, Path)); MediaError says what is wrong."""
    from pathlib import Path

    from app.attachments import inspect

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
    encoded = {e.id: e for e in session.engine.encoded}
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
    from app.devices.buffer_names import device_of

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
    from app.conversation.reasoning import split_reply

    cells = session.engine.kv_cells_used()
    stats = outcome.stats
    split = split_reply(outcome.text)
    return {
        "answer": split.answer.strip() if split.has_reasoning else outcome.text,
        "reasoning": split.reasoning.strip() if split.has_reasoning else None,
        "stopped_by": stats.stopped_by,
        "prompt_tokens": stats.prompt_tokens,
        "tokens": stats.generated_tokens,
        "tokens_per_second": round(stats.tokens_per_second, 2),
        "config": now.config.to_json(),
        "max_ctx": model.max_ctx,
        "reasons": model.fit.reasons,
        "devices": [{"name": d.name, "total": d.total, "margin": d.margin} for d in now.gpus],
        "host": {"total": now.host.total},
        "memory": {
            "planned": {**{d.name: d.planned for d in now.gpus}, "CPU": now.host.planned},
            "allocated": allocated,
            "kv_committed": kv_committed,
            "kv_in_use": {"cells": cells, "bytes": kv_bytes_in_use(plan.kv, cells)},
        },
        "projector": _projector_json(model),
    }
