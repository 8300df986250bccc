"""The model catalog: scanned files joined with their plan summaries (cached or fresh).

Shared by the picker and `vramchat --list`; imports neither Textual nor llama_cpp.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

from app.caches.plans import ModelSummary, PlanCache, device_fingerprint, file_key
from app.discovery import Folder, ModelFile, scan
from app.model_summary import summarize, with_plan
from planner.hardware import Device, Host, format_size

__all__ = ["Catalog", "CatalogEntry", "fit_badge", "format_params", "summarize", "table_rows", "with_plan"]


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

    def planned(self, todo: list[CatalogEntry]) -> Generator[CatalogEntry, None, None]:
        """Each entry of `todo` planned and kept, as it is: in worker processes for a long list
        (app.catalog_workers, in the order they finish), else here in turn. An entry a worker could not plan
        (it died) is planned here. Closing the generator (a scan cancelled) ends the workers."""
        from app.catalog_workers import summaries_in_workers, worker_count

        workers = worker_count(len(todo))
        if not workers:
            for entry in todo:
                yield self.plan(entry)
            return
        left: list[CatalogEntry] = []
        summaries = summaries_in_workers([e.file.path for e in todo], self.gpus, self.host, workers)
        try:
            for index, summary in summaries:
                if summary is None:
                    left.append(todo[index])
                else:
                    yield self.keep(todo[index], summary)
        finally:
            summaries.close()
        for entry in left:
            yield self.plan(entry)

    def complete(
        self, entries: list[CatalogEntry], progress: Callable[[int, int], None] | None = None
    ) -> list[CatalogEntry]:
        """Plan every entry that is not fresh; save the cache."""
        todo = [e for e in entries if not e.fresh]
        for i, _ in enumerate(self.planned(todo), start=1):
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
