"""Compute buffers: build the reserve graphs llama.cpp builds and replay its allocator.

`llama_context::sched_reserve` reserves three graphs, a prompt micro-batch of
min(n_ctx, n_ubatch) tokens with all outputs, a one-token-per-sequence graph
and the prompt graph again, and keeps each backend buffer at the largest size
any of them needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.backends import CPU
from planner.config import Resolved
from planner.ggml_alloc import BufferType, reserve
from planner.ggml_graph import Graph, Tensor
from planner.graphs import builder_for
from planner.graphs.context import GraphContext, GraphShape, WeightSet
from planner.kv import KVLayout
from planner.model import ModelAnatomy


@dataclass(frozen=True)
class ComputeBuffers:
    sizes: dict[str, int]  # buffer name (CPU, CUDA0, ...) -> bytes
    n_nodes: int


def _cpu_buffer_type() -> BufferType:
    return BufferType("CPU", CPU.alignment, lambda t: t.nbytes())


def build_graph(model: ModelAnatomy, r: Resolved, kv: KVLayout, n_tokens: int, n_seqs: int,
                n_outputs: int) -> GraphContext:
    shape = GraphShape(
        n_tokens=n_tokens,
        n_seqs=n_seqs,
        n_outputs=n_outputs,
        flash_attn=r.config.flash_attn,
        type_k=r.type_k,
        type_v=r.type_v,
        kv_unified=r.config.kv_unified,
        n_kv=kv.cells,
        n_kv_swa=kv.cells_swa or kv.cells,
        n_stream=kv.n_stream,
        n_rs=max(1, r.n_seq_max),
    )
    g = Graph()
    caches: dict[tuple[int, bool], tuple[Tensor, Tensor | None]] = {}
    by_layer: dict[int, dict[str, Tensor]] = {}
    for t in kv.tensors:
        tensor = g.weight(t.type, t.ne, f"cache_{t.kind}_l{t.layer}")
        by_layer.setdefault(t.layer, {})[t.kind] = tensor
    for il, kinds in by_layer.items():
        swa = next(t.swa for t in kv.tensors if t.layer == il)
        caches[(il, swa)] = (kinds["k"], kinds.get("v"))
    ctx = GraphContext(model, shape, WeightSet(model, caches, g), g)
    builder_for(model.architecture)(ctx)
    return ctx


def compute_buffers_cpu(model: ModelAnatomy, r: Resolved, kv: KVLayout) -> ComputeBuffers:
    """Compute buffer of a CPU-only run (one backend, one buffer)."""
    n_tokens = r.reserve_tokens
    n_seqs = r.n_seq_max
    n_outputs_pp = min(n_tokens, r.n_batch)
    # n_tokens is rounded up to a multiple of n_seqs (graph_reserve)
    pp_tokens = -(-n_tokens // n_seqs) * n_seqs
    pp = build_graph(model, r, kv, pp_tokens, n_seqs, n_outputs_pp)
    tg = build_graph(model, r, kv, n_seqs, n_seqs, n_seqs)
    buffers = {"CPU": _cpu_buffer_type()}
    sizes = reserve([(pp.g.nodes, pp.g.leafs), (tg.g.nodes, tg.g.leafs)], buffers)
    return ComputeBuffers(sizes, len(pp.g.nodes))
