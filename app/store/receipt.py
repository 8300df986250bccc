"""A plan receipt: what a chat ran with, to keep with the chat and share in a bug report.

The plan (the `--plan --json` contract), llama.cpp's dry run of it before the load, the buffers
llama.cpp allocated, and the peaks measured while the chat ran (device memory, the engine's RSS,
the KV cache, tokens per second). One receipt per load a chat ran on (`key`): a reload with a
smaller plan starts another. After each reply the session's telemetry is read again and the peaks
merged with those kept, since the telemetry keeps only its last ten minutes.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from app import __version__
from app.engine.llama_log import LOG_ROUNDING
from app.memory_words import ALLOCATED, COMMITTED, IN_USE, OTHER_PROGRAMS, PLANNED
from planner.hardware import format_size
from planner.report import plan_to_json

if TYPE_CHECKING:
    from app.session import LoadedModel
    from app.telemetry import Sample

SCHEMA = 1


def key_for(model: LoadedModel) -> str:
    """What tells one load from another: the file and the configuration loaded."""
    config = json.dumps(plan_to_json(model.fit)["config"], sort_keys=True)
    return hashlib.sha1(f"{model.path}\n{config}".encode(errors="surrogateescape")).hexdigest()[:16]  # any file name


def peaks(history: list[Sample]) -> dict[str, Any]:
    """The largest figure each reading reached over these samples."""
    devices: dict[str, dict[str, int]] = {}
    for s in history:
        for name, (used, total) in s.devices.items():
            seen = devices.setdefault(name, {"used": 0, "total": total})
            seen["used"] = max(seen["used"], used)
            seen["total"] = total
    return {
        "devices": devices,
        "rss": max((s.rss for s in history), default=0),
        "kv_in_use": max((s.kv_used for s in history), default=0),
        "kv_committed": max((s.kv_allocated for s in history), default=0),
        "compute": max((sum(s.compute.values()) for s in history), default=0),
        "context_tokens": max((s.kv_cells_used for s in history), default=0),
        "tokens_per_second": round(max((s.tokens_per_second for s in history), default=0.0), 2),
    }


def merge_peaks(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out = dict(new)
    for key, value in old.items():
        if key == "devices":
            devices = {name: dict(v) for name, v in new.get("devices", {}).items()}
            for name, seen in value.items():
                mine = devices.setdefault(name, dict(seen))
                mine["used"] = max(mine.get("used", 0), seen.get("used", 0))
            out["devices"] = devices
        elif isinstance(value, (int, float)):
            out[key] = max(value, new.get(key, 0))
    return out


def build(
    model: LoadedModel, history: list[Sample], previous: dict[str, Any] | None = None, reply_speed: float = 0.0
) -> dict[str, Any]:
    """The receipt for the chat's run on `model` so far (`previous`: the one kept, whose peaks carry on;
    `reply_speed`: the reply's own tokens per second, which the samples, twice a second and zero between
    replies, miss when the reply is shorter than that)."""
    measured = model.report.measurements
    v = model.verification
    dry_run: dict[str, Any] | None = None
    if v is not None:
        dry_run = {
            "ok": v.dry_run.ok,
            "seconds": round(v.seconds, 3),
            "verified": v.verified,
            "n_ctx": model.max_ctx,
            "message": model.dry_run_message,
            "buffers": [
                {"kind": g.kind, "devices": list(g.devices), "planned": g.planned, "dry_run": g.measured}
                for g in v.gaps
            ],
            "errors": list(v.dry_run.errors),
        }
    now = time.time()
    peaks_seen = peaks(history)
    peaks_seen["tokens_per_second"] = max(peaks_seen["tokens_per_second"], round(reply_speed, 2))
    committed = model.n_ctx
    if previous and previous.get("peaks"):
        peaks_seen = merge_peaks(previous["peaks"], peaks_seen)
        committed = max(committed, previous.get("context", {}).get("committed", 0))
    return {
        "schema": SCHEMA,
        "vramchat": __version__,
        "model": model.name,
        "path": model.path,
        "first_used": previous.get("first_used", now) if previous else now,
        "last_used": now,
        "plan": plan_to_json(model.fit),
        "context": {"committed": committed, "maximum": model.max_ctx},
        "changes": list(model.changes),
        "dry_run": dry_run,
        "allocated": [
            {"kind": kind, "name": name, "bytes": size}
            for kind, table in measured.tables()
            for name, size in table.items()
        ],
        "load_seconds": round(model.report.seconds, 3),
        "peaks": peaks_seen,
    }


def to_markdown(receipt: dict[str, Any]) -> str:
    """The receipt as a Markdown section: the plan, the dry run, what was allocated, the peaks."""
    plan = receipt.get("plan", {})
    config = plan.get("config", {})
    lines = [
        f"**{receipt.get('model', '?')}** · {plan.get('verdict', '?')} · "
        f"context {receipt.get('context', {}).get('committed', 0):,} of {config.get('n_ctx', 0):,} tokens · "
        f"KV {config.get('type_k', '?')}/{config.get('type_v', '?')} · "
        f"batch {config.get('n_batch', '?')}/ubatch {config.get('n_ubatch', '?')} · "
        f"GPU layers {config.get('n_gpu_layers', 0)} · flash attention {'on' if config.get('flash_attn') else 'off'} · "
        f"{plan.get('llama_cpp_build', '')} · vramchat {receipt.get('vramchat', '?')}",
        "",
        f"| device | {PLANNED} | weights | KV | compute | {OTHER_PROGRAMS} at load | peak {IN_USE}, all programs |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    peaks_seen = receipt.get("peaks", {})
    device_peaks = peaks_seen.get("devices", {})
    host = plan.get("host", {})
    for d in [*plan.get("devices", []), {"name": "CPU", **host}]:
        peak = device_peaks.get(d["name"], {})
        lines.append(
            f"| {d['name']} | {format_size(d.get('planned', 0))} | "
            f"{format_size(d.get('weights', 0) + d.get('weights_mapped', 0))} | {format_size(d.get('kv', 0))} | "
            f"{format_size(d.get('compute', 0))} | {_others(d)} | "
            f"{format_size(peak['used']) + ' of ' + format_size(peak['total']) if peak else '-'} |"
        )
    dry = receipt.get("dry_run")
    lines.append("")
    if dry is None:
        lines.append("Dry run: none (the engine had none).")
    elif not dry.get("ok"):
        lines.append(f"Dry run: llama.cpp could not build the configuration ({'; '.join(dry.get('errors', []))}).")
    else:
        verdict = "every figure as planned" if dry.get("verified") else "llama.cpp's figures differed"
        lines.append(f"Dry run of the {dry.get('n_ctx', 0):,}-token plan ({dry.get('seconds', 0):.2f} s): {verdict}.")
        for b in dry.get("buffers", []):
            mark = "" if abs(b["dry_run"] - b["planned"]) <= LOG_ROUNDING else " (differs)"
            lines.append(
                f"- {b['kind']} on {'+'.join(b['devices'])}: planned {format_size(b['planned'])}, "
                f"dry run {format_size(b['dry_run'])}{mark}"
            )
        if dry.get("message"):
            lines.append(f"- {dry['message']}")
    if receipt.get("changes"):
        lines.append(f"Loaded with a smaller plan than chosen: {'; '.join(receipt['changes'])}.")
    lines += [
        "",
        f"Peaks: engine RSS {format_size(peaks_seen.get('rss', 0))}, KV {IN_USE} "
        f"{format_size(peaks_seen.get('kv_in_use', 0))} of {format_size(peaks_seen.get('kv_committed', 0))} "
        f"{COMMITTED}, compute {ALLOCATED} {format_size(peaks_seen.get('compute', 0))}, "
        f"{peaks_seen.get('context_tokens', 0):,} tokens in the context, "
        f"{peaks_seen.get('tokens_per_second', 0):.1f} tokens/s at most; loaded in "
        f"{receipt.get('load_seconds', 0):.1f} s.",
    ]
    return "\n".join(lines)


def _others(device: dict[str, Any]) -> str:
    """Other programs' memory on a device when the plan was made (its total less its free memory)."""
    if "total" not in device:
        return "-"
    return format_size(max(device["total"] - device.get("free", 0), 0))
