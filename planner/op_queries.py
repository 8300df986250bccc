"""The ops of a model's graphs to ask a device about (planner.op_support): the reserve graphs of a few
configurations, built as the compute buffers build them, each op once, with the extents of the graphs it is in."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from planner.op_support import NOT_ASKED, OpKey, graph_extents, op_key

if TYPE_CHECKING:
    from planner.config import LoadConfig
    from planner.model import ModelAnatomy

# (context, micro-batch, sequences) of the configurations asked: a short and a long context (some graphs change
# with it: a sparse-attention top k beyond the context is left out), a small micro-batch beside the default one so
# that a dimension of the model that equals one extent in one graph is seen apart from it in another, and two
# sequences in two streams (the streams are an extent too)
ASKED_SHAPES = ((512, 512, 1), (4096, 512, 1), (4096, 128, 1), (2048, 512, 2))


def ask_configs(model: ModelAnatomy) -> list[LoadConfig]:
    """The configurations whose graphs the probe asks about: ASKED_SHAPES with flash attention off and on and
    f16, q8_0 and q4_0 caches (V quantized only with flash attention, as llama.cpp requires)."""
    from planner.config import LoadConfig

    return [
        LoadConfig(
            n_ctx=n_ctx,
            n_ubatch=n_ubatch,
            n_seq_max=n_seq,
            flash_attn=flash_attn,
            type_k=kv,
            type_v=kv if flash_attn else "f16",
            n_gpu_layers=0,
        )
        for n_ctx, n_ubatch, n_seq in ASKED_SHAPES
        for flash_attn in (False, True)
        for kv in ("f16", "q8_0", "q4_0")
    ]


def model_ops(model: ModelAnatomy, configs: Iterable[LoadConfig] | None = None) -> dict[OpKey, set[frozenset[int]]]:
    """The distinct ops of the model's reserve graphs (the prompt micro-batch and the one-token graph) over
    `configs` (default `ask_configs`), in first-seen order, each with the extents of every graph it is in. A
    configuration llama.cpp would refuse is left out."""
    from planner.compute import build_graph, reserve_shapes
    from planner.config import resolve
    from planner.errors import PlannerError
    from planner.kv import kv_layout

    seen: dict[OpKey, set[frozenset[int]]] = {}
    for config in configs if configs is not None else ask_configs(model):
        try:
            r = resolve(model, config)
            kv = kv_layout(model, r)
            for tokens, seqs, outputs in reserve_shapes(model, r):
                ctx = build_graph(model, r, kv, tokens, seqs, outputs)
                extents = graph_extents(tokens, outputs, kv.cells, kv.cells_swa, kv.n_stream, tokens // kv.n_stream)
                for node in ctx.g.nodes:
                    if node.op not in NOT_ASKED:
                        seen.setdefault(op_key(node), set()).add(extents)
        except PlannerError:
            continue
    return seen
