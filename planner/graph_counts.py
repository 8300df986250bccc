"""What a one-token graph runs, counted once a process: the speed plan prices a token by its operations, and
the compute pricing builds the same one-token graph (llama.cpp reserves it beside the prompt's), so whichever
builds it first notes the counts for the other (a cold plan built it twice)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.config import Resolved
    from planner.ggml_graph import Graph
    from planner.model import ModelAnatomy

# (operations, of which mat-muls, elements produced between the mat-muls by kind); None: no graph builder
Counts = tuple[int, int, dict[str, int]]
Key = tuple[str, int, int, bool, str]

EMPTY_OPS = frozenset({"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})  # they cost nothing
# an element-wise op's kind, where it differs from "plain" (planner.speed prices each kind apart)
ELEMENTWISE_KINDS = {"ROPE": "rope", "RMS_NORM": "norm", "NORM": "norm", "L2_NORM": "norm", "GROUP_NORM": "norm"}
NOT_ELEMENTWISE = frozenset({"MUL_MAT", "MUL_MAT_ID", "FLASH_ATTN_EXT", "SOFT_MAX", "OUT_PROD"})
WRITES_SOURCE = frozenset({"SET_ROWS", "CPY"})
MAT_MULS = frozenset({"MUL_MAT", "MUL_MAT_ID"})

_memo: dict[Key, Counts | None] = {}


def key_of(model: ModelAnatomy, r: Resolved) -> Key:
    """What the counts depend on: the model and the graph's kind (flash attention, the K cache's type)."""
    return (model.path, model.file_bytes, model.n_layer, r.config.flash_attn, r.type_k.name)


def count(graph: Graph) -> Counts:
    """The operations of `graph`, its mat-muls, and the elements its other operations produce, by kind."""
    nodes = [node for node in graph.nodes if node.op not in EMPTY_OPS]
    elements: dict[str, int] = {}
    for node in nodes:
        if node.op not in NOT_ELEMENTWISE:
            kind = "gelu" if node.act == "gelu" else ELEMENTWISE_KINDS.get(node.op, "plain")
            # a copy into the cache is a view of the whole cache: it writes its source's elements
            written = node.src[0] if node.op in WRITES_SOURCE and node.src else node
            elements[kind] = elements.get(kind, 0) + written.n_elements()
    return len(nodes), sum(1 for node in nodes if node.op in MAT_MULS), elements


def noted(key: Key) -> tuple[bool, Counts | None]:
    """(whether the counts for `key` are known, the counts)."""
    return key in _memo, _memo.get(key)


def note(key: Key, counts: Counts | None) -> None:
    _memo[key] = counts
