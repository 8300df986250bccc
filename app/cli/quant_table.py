"""`vramchat --quants MODEL`: every GGUF of a Hugging Face repo (ORG/REPO) or a folder planned with the devices
probed once (app.quants.plan_quants), printed as one table or JSON with the best choice."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from app.cli.exits import EXIT_NO_FIT, EXIT_OK
from app.errors import VramchatError
from app.terminal_text import write_control

if TYPE_CHECKING:
    import argparse

    from app.planning import Planned
    from app.quants import QuantTable
    from app.sources.model import ModelSource
    from planner.model import ModelAnatomy


def quant_sources(target: str) -> tuple[str, list[ModelSource]]:
    """The models `target` names: a hub repo's (ORG/REPO, hf:ORG/REPO), or a local folder's; (title, models)."""
    from app.sources.refs import HubRef, parse_ref

    if os.path.isdir(target):
        return target, _folder_sources(target)
    ref = parse_ref(target)
    if isinstance(ref, HubRef):
        from app.sources import hub

        listing = hub.list_repo(ref.repo_id, ref.revision)
        title = f"{listing.repo_id} (commit {listing.commit[:10]})" if listing.commit else listing.repo_id
        return title, hub.repo_models(listing)
    from app.sources import resolve_source

    return target, [resolve_source(target)]


def _folder_sources(folder: str) -> list[ModelSource]:
    from pathlib import Path

    from app.discovery import Folder, scan
    from app.sources.model import LOCAL, ModelSource, SourceFile
    from app.sources.naming import quant_of

    out = []
    for f in scan([Folder(Path(folder), "--quants")]):
        shards = tuple(SourceFile(name=p, size=_size(p)) for p in f.shards)
        projectors = tuple(SourceFile(name=p, size=_size(p)) for p in f.projectors)
        problem = f.problem
        out.append(ModelSource(LOCAL, f.path, shards, projectors, quant=quant_of(f.path), problem=problem))
    out.sort(key=lambda m: (m.size, m.ref))
    return out


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def run_quants(args: argparse.Namespace) -> int:
    from app import sources
    from app.cli.command_plan import check_context, command_choice, devices_for, projector_rule, refused_as_usage
    from app.planning import plan_source
    from app.quants import plan_quants

    title, models = quant_sources(args.model)
    if not models:
        raise VramchatError(f"{args.model}: no GGUF model in it")
    for model in models:
        sources.remember(model)
    check_context(args)
    report = devices_for(args)  # once for every model: as `--plan` would for each, with the same flags
    choice = command_choice(args)

    def plan(source: ModelSource, anatomy: ModelAnatomy) -> Planned:
        rule = projector_rule(source.ref, args, None)  # --mmproj is not planned beside each quant
        with refused_as_usage():
            return plan_source(source, report, choice, anatomy=anatomy, projector=rule)

    progress = _progress_line("planned") if sys.stderr.isatty() and not args.json else None
    table = plan_quants(models, sources.load_anatomy, plan, progress)
    if progress:
        write_control(sys.stderr, "\r\033[K")
    if all(row.result is None for row in table.rows):  # not one header could be read: say why, once
        raise VramchatError(table.rows[0].error if len(table.rows) == 1 else f"{args.model}: {table.rows[0].error}")
    if args.json:
        print(json.dumps(quants_json(title, table, report), indent=2))
    else:
        print(quants_text(title, table, report))
    return EXIT_OK if table.best is not None else EXIT_NO_FIT


def _progress_line(what: str) -> Any:
    def show(done: int, total: int) -> None:
        write_control(sys.stderr, "\r\033[K")
        sys.stderr.write(f"{what} {done}/{total}")
        sys.stderr.flush()

    return show


def _row_cells(row: Any) -> list[str]:
    from app.catalog import fit_badge
    from planner.hardware import format_size

    summary = row.summary
    badge = fit_badge(summary)[0]
    if row.result is None:
        return [row.label, format_size(row.source.size), badge, "-", "-", "-", "-"]
    plan = row.result.plan
    kv = plan.resolved.type_k.name
    if plan.resolved.type_v.name != kv:
        kv += f"/{plan.resolved.type_v.name}"
    layers = f"{plan.layers_on_gpu}/{summary.n_layer + 1}" if plan.gpus else "0 (CPU)"
    return [row.label, format_size(row.source.size), badge, f"{plan.resolved.n_ctx:,}", layers, kv, row.speed_cell]


def quants_text(title: str, table: QuantTable, report: Any) -> str:
    from planner.hardware import format_size

    header = ["quant", "size", "fit on this machine", "context", "GPU layers", "KV", "tok/s"]
    rows = [header] + [_row_cells(r) for r in table.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"{title}: {len(table.rows)} model{'s' if len(table.rows) != 1 else ''}", ""]
    for index, cells in enumerate(rows):
        mark = "  "
        if index and table.rows[index - 1].best:
            mark = "* "
        text = "  ".join(c.rjust(w) if k in (1, 3) else c.ljust(w) for k, (c, w) in enumerate(zip(cells, widths)))
        lines.append((mark + text).rstrip())
    lines.append("")
    if table.best is not None:
        best = table.rows[table.best]
        lines.append(f"* Best: {best.label} ({best.source.file_name}): {table.why}")
    else:
        lines.append(f"Best: none: {table.why}")
    projectors = {p.file_name: p.size for r in table.rows for p in r.source.projectors}
    if projectors:
        lines.append(
            "Projectors (images): "
            + ", ".join(f"{name} ({format_size(size)})" for name, size in sorted(projectors.items()))
            + "; --download takes one with the model"
        )
    for row in table.rows:
        if row.error:
            lines.append(f"{row.source.file_name}: {row.error}")
    if report is not None:
        from app.devices.render import device_line

        lines.append(f"Planned for: {device_line(report)}")
    lines.append(
        "tok/s: predicted decode at the start of a chat, the range --plan MODEL and the model list show "
        "(? where a figure is missing; measuring… until this CPU's speed is measured on a quiet machine)"
    )
    return "\n".join(lines)


def quants_json(title: str, table: QuantTable, report: Any) -> dict[str, Any]:
    from app.catalog import fit_badge
    from planner.report import plan_to_json

    out_rows = []
    for row in table.rows:
        summary = row.summary
        item: dict[str, Any] = {
            "quant": row.quant,
            "ref": row.source.ref,
            "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in row.source.files],
            "projectors": [{"name": p.name, "size": p.size, "sha256": p.sha256} for p in row.source.projectors],
            "size": row.source.size,
            "fit": fit_badge(summary)[0],
            "best": row.best,
            "tokens_per_second": round(row.tokens_per_second, 1) if row.tokens_per_second is not None else None,
            "speed": row.speed.to_json() if row.speed is not None else None,
            "error": row.error or None,
        }
        if row.result is not None:
            plan = row.result.plan
            item.update(
                verdict=plan.verdict,
                exact=summary.exact,
                config=plan_to_json(row.result)["config"],
                n_ctx=plan.resolved.n_ctx,
                n_gpu_layers=plan.layers_on_gpu,
                type_k=plan.resolved.type_k.name,
                type_v=plan.resolved.type_v.name,
                planned={**{d.name: d.planned for d in plan.gpus}, "host": plan.host.planned},
            )
        out_rows.append(item)
    best = table.rows[table.best] if table.best is not None else None
    return {
        "source": title,
        "models": out_rows,
        "best": {"ref": best.source.ref, "quant": best.quant, "why": table.why} if best else None,
        "why": table.why,
        "notes": table.notes,
        "devices": report.to_json() if report is not None and hasattr(report, "to_json") else None,
    }
