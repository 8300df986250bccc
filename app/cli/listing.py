"""`vramchat --list`: the models the picker would list, with their fit on this machine (a table or JSON)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from app.cli.exits import EXIT_OK
from app.errors import UsageError
from app.terminal_text import terminal_safe

if TYPE_CHECKING:
    import argparse


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
                            "ollama_name": e.file.ollama_name or None,
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
    # names and paths come from outside: made safe before the columns are measured, so that they line up
    rows = [header, *([terminal_safe(cell) for cell in row] for row in table_rows(entries, report.gpus))]
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
