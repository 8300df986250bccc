"""A MODEL given by the name the picker and `vramchat --list` show it under: `vramchat serve
Qwen3-8B-Q4_K_M`, `vramchat gemma-3-270m-q4_k_m.gguf -p hi`, from any folder. The name is a model file's
(with or without `.gguf`; a split model's without its `-00001-of-0000N`), looked up in the folders the list
scans; a name two files share is refused with both paths, never guessed."""

from __future__ import annotations

import os
from collections.abc import Iterable

from app.errors import UsageError, VramchatError
from planner.units import SPLIT_NAME


def names_of(path: str) -> set[str]:
    """The names a model file answers to: its file name, without `.gguf`, and a split model's stem."""
    name = os.path.basename(path).lower()
    out = {name, name.removesuffix(".gguf")}
    match = SPLIT_NAME.match(os.path.basename(path))
    if match:
        out.add(match["stem"].lower())
    return out


def find_listed(name: str, extra_dirs: Iterable[str] = ()) -> str:
    """The path of the one listed model called `name`; VramchatError where none is, UsageError where several."""
    from app.discovery import folders_to_scan, scan
    from app.settings import load_settings

    settings, _warning = load_settings()
    folders = folders_to_scan(extra_dirs, settings.models_dirs, settings.scan_known_caches)
    wanted = name.lower()
    paths = sorted({m.path for m in scan(folders) if not m.ollama_name and wanted in names_of(m.path)})
    if not paths:
        raise VramchatError(f"{name}: no such file, and no model vramchat lists has that name (vramchat --list)")
    if len(paths) > 1:
        raise UsageError(f"{name} names {len(paths)} models: {', '.join(paths)}; give the path of the one to use")
    return paths[0]
