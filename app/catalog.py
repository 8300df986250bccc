"""The model catalog: scanned files joined with their plan summaries (cached or fresh).

Shared by the picker and `vramchat --list`; imports neither Textual nor llama_cpp.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.caches.plans import ModelSummary, PlanCache, device_fingerprint, file_key
from app.discovery import Folder, ModelFile, scan
from planner.hardware import Device, Host, format_size

if TYPE_CHECKING:
    from planner.memory import MemoryPlan


@dataclass
class CatalogEntry:
    file: ModelFile
    summary: ModelSummary | None = None  # None until planned
    fresh: bool = False  # planned for the devices as they are now

    @property
    def key(self) -> str:
        return file_key(self.file.path, self.file.size, self.file.mtime_ns)

    @property
    def name(self) -> str:
        """Ollama's name for one of its models (`gemma3:270m`), else the model's own, else its file's: a label
        from outside, made safe for the terminal (app.terminal_text)."""
        from app.terminal_text import terminal_safe

        s = self.summary
        return terminal_safe(self.file.ollama_name or (s.name if s and s.name else "") or self.file.file_name)


def summarize(path: str, gpus: list[Device], host: Host) -> ModelSummary:
    """Read the header and solve the default wishes (app.planning's one way in); any failure becomes
    the summary's error."""
    from app.planning import Machine, PlanChoice, plan_source, read_anatomy
    from planner.errors import PlannerError

    try:
        model = read_anatomy(path)
    except PlannerError as exc:
        return ModelSummary(error=getattr(exc, "problem", str(exc)))
    except Exception as exc:  # a hostile file must not stop the scan
        return ModelSummary(error=f"cannot read: {type(exc).__name__}: {exc}")
    summary = ModelSummary(
        name=model.name,
        architecture=model.architecture,
        n_params=model.n_params,
        quantization=model.quantization,
        file_bytes=model.file_bytes,
        n_layer=model.n_layer,
        n_ctx_train=model.n_ctx_train,
        exact=model.exact,
    )
    try:
        planned = plan_source(path, Machine(gpus, host), PlanChoice(), anatomy=model)
    except PlannerError as exc:
        summary.error = str(exc)
        return summary
    except Exception as exc:
        summary.error = f"planning failed: {type(exc).__name__}: {exc}"
        return summary
    return with_plan(summary, planned.fit.plan)


def with_plan(summary: ModelSummary, plan: MemoryPlan) -> ModelSummary:
    """The summary's fit: the plan's verdict, layers on the GPUs, context and cache choices."""
    from planner.offload import offload_badge

    summary.verdict = plan.verdict
    summary.layers_on_gpu = plan.layers_on_gpu
    summary.offload_badge = offload_badge(plan)
    summary.n_ctx = plan.resolved.n_ctx
    summary.type_k = plan.resolved.type_k.name
    summary.flash_attn = plan.resolved.config.flash_attn
    from app.speed import summary_fields

    try:
        for name, value in summary_fields(plan).items():
            setattr(summary, name, value)
    except Exception:  # no speed column for this row, rather than no row
        pass
    return summary


class Catalog:
    def __init__(self, gpus: list[Device], host: Host, cache: PlanCache | None = None) -> None:
        self.gpus, self.host = gpus, host
        self.cache = cache if cache is not None else PlanCache()
        self.fingerprint = device_fingerprint(gpus, host)

    def scan(
        self, folders: list[Folder], demo_path: Path | None = None, progress: Callable[[str], None] | None = None
    ) -> list[CatalogEntry]:
        """The models found, with cached summaries where the cache has them (maybe stale)."""
        entries = []
        for file in scan(folders, demo_path, progress):
            entry = CatalogEntry(file)
            if file.problem:
                entry.summary, entry.fresh = ModelSummary(error=file.problem, file_bytes=file.size), True
            else:
                hit = self.cache.get(entry.key, self.fingerprint)
                if hit is not None:
                    entry.summary, entry.fresh = hit
            entries.append(entry)
        return entries

    def plan(self, entry: CatalogEntry) -> CatalogEntry:
        return self.keep(entry, summarize(entry.file.path, self.gpus, self.host))

    def keep(self, entry: CatalogEntry, summary: ModelSummary) -> CatalogEntry:
        """`entry` with its summary, fresh, and the summary in the cache (planned here or in a worker)."""
        entry.summary = summary
        entry.fresh = True
        self.cache.put(entry.key, self.fingerprint, summary)
        return entry

    def complete(
        self, entries: list[CatalogEntry], progress: Callable[[int, int], None] | None = None
    ) -> list[CatalogEntry]:
        """Plan every entry that is not fresh; save the cache."""
        todo = [e for e in entries if not e.fresh]
        for i, entry in enumerate(todo, start=1):
            self.plan(entry)
            if progress:
                progress(i, len(todo))
        self.cache.save()
        return entries


# -- words for a row ----------------------------------------------------------------------------


def format_params(n: int) -> str:
    if n <= 0:
        return "?"
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(n)


def fit_badge(summary: ModelSummary | None) -> tuple[str, str]:
    """(text, kind) where kind is full, partial, cpu, none, error or pending; the text says "estimate"
    for an architecture the planner has no exact rules for, "checked" once llama.cpp's dry run has
    confirmed that plan on this machine (app.estimate_check)."""
    if summary is None:
        return "planning…", "pending"
    if summary.error:
        return "unreadable", "error"
    units = summary.n_layer + 1
    text, kind = {
        "full_gpu": (f"{summary.offload_badge or 'full GPU'} · {summary.n_ctx:,} tok", "full"),
        "partial_gpu": (f"partial · {summary.layers_on_gpu}/{units} layers", "partial"),
        "cpu_only": (f"CPU only · {summary.n_ctx:,} tok", "cpu"),
        "no_fit": ("won't fit", "none"),
    }.get(summary.verdict, (summary.verdict or "?", "error"))
    if not summary.exact and kind != "error":
        # no exact rules for this architecture: an estimate until llama.cpp's dry run checks it
        text += " · checked" if summary.checked else " · estimate"
    return text, kind


def speed_cell(entry: CatalogEntry, gpus: list[Device]) -> str:
    """The predicted decode speed at the start of a chat, for a model list: "38–71 tok/s", "≈41 tok/s",
    "measuring…" (app.speed.file_speed: the figure the hub and --plan show for the same file)."""
    from app.speed import predict_summary

    s = entry.summary
    if s is None or s.error or s.verdict == "no_fit":
        return "-"
    try:
        prediction = predict_summary(s, entry.file.path, gpus)
    except Exception:
        return "?"
    return prediction.short() if prediction is not None else "?"


def table_rows(entries: list[CatalogEntry], gpus: list[Device] | None = None) -> list[tuple[str, ...]]:
    """Name, architecture, parameters, quantization, size, fit, speed (with `gpus`), path: the list's columns."""
    rows = []
    for e in entries:
        s = e.summary
        name = e.name + (" (demo)" if e.file.is_demo else "")
        extras = []
        if len(e.file.shards) > 1:
            extras.append(f"{len(e.file.shards)} shards")
        if e.file.projectors:
            extras.append("+ vision projector")
        if extras:
            name += f" [{', '.join(extras)}]"
        rows.append(
            (
                name,
                (s.architecture if s else "") or "-",
                format_params(s.n_params if s else 0),
                (s.quantization if s else "") or "-",
                format_size(e.file.size),
                fit_badge(s)[0],
                *([speed_cell(e, gpus)] if gpus is not None else []),
                e.file.path,
            )
        )
    return rows
