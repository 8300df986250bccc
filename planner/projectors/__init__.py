"""Vision projectors whose compute buffer the planner builds exactly, one module per clip.cpp graph.

`RULES` maps a projector type (the mmproj's `clip.projector_type`) to the module that
knows its encoder: the image size clip's warmup reserves for, the graph it builds
(`tools/mtmd/models/<family>.cpp`) and, where clip.cpp leaves tensors of the file
unloaded, which ones it loads. Modules are imported the first time a projector of
their type is planned. Types without a rule keep `Projector.compute_estimate`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

RULES: dict[str, str] = {
    "gemma3": "gemma3",
    "qwen3vl_merger": "qwen3vl",
    "pixtral": "pixtral",
    "gemma4v": "gemma4v",
}


def rule_for(projector_type: str) -> ModuleType | None:
    """The family module for this projector type, or None when its compute is only estimated."""
    name = RULES.get(projector_type)
    if name is None:
        return None
    return importlib.import_module(f"planner.projectors.{name}")
