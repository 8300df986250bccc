"""Vision projectors whose compute buffer the planner builds exactly, one module per clip.cpp graph.

`RULES` maps a projector type (the mmproj's `clip.projector_type`) to the module that
knows its encoder. Its `RULE` (a `planner.projectors.clip.ProjectorRule`) gives the image
size clip's warmup reserves for, the graph it builds (`tools/mtmd/models/<family>.cpp`)
and, where clip.cpp leaves tensors of the file unloaded, which ones it loads. Modules are
imported the first time a projector of their type is planned. Types without a rule keep
`planner.projectors.compute.compute_estimate`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.projectors.clip import ProjectorRule

RULES: dict[str, str] = {
    "gemma3": "gemma3",
    "qwen3vl_merger": "qwen3vl",
    "pixtral": "pixtral",
    "gemma4v": "gemma4v",
}


def rule_for(projector_type: str) -> ProjectorRule | None:
    """The family module's rule for this projector type, or None when its compute is only estimated."""
    name = RULES.get(projector_type)
    if name is None:
        return None
    # a module imported by name is untyped to mypy: each family's RULE is checked where it is made
    rule: ProjectorRule = importlib.import_module(f"planner.projectors.{name}").RULE
    return rule
