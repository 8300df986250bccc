"""Compute buffers: build the reserve graphs llama.cpp builds, schedule them, replay the allocator.

`llama_context::sched_reserve` reserves a prompt micro-batch of
min(n_ctx, n_ubatch) tokens with all outputs, a one-token-per-sequence graph
and the prompt graph again; each backend buffer ends at the largest size any
of them needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from planner import graph_counts
from planner.archs import build_model_graph
from planner.backends import CPU, BackendRules, device_rules, host_alignment
from planner.config import Resolved
from planner.ggml_alloc import BufferType, reserve
from planner.ggml_graph import Graph, Tensor
from planner.graphs.context import GraphContext, GraphShape, WeightSet
from planner.hardware import Device
from planner.kv import KVLayout
from planner.model import ModelAnatomy
from planner.op_support import graph_extents
from planner.scheduler import SchedBackend, Scheduler
from planner.units import HOST_BUFFER
from planner.weights import HOST_INDEX, LayerPlacement, WeightBuffers

# llama_context::sched_reserve's last prompt graph has one sequence for these ([TAG_RESERVE_DIAG_DECAY])
_RESERVE_ONE_SEQUENCE = frozenset(("kimi-linear", "minimax-01"))

# where a weight lives: (name, duplicate) -> (backend, whether a host weight sits in a plain host buffer)
LocateWeight = Callable[[str, bool], tuple[str, bool]]
# where a layer's caches live: layer index -> backend
LocateLayer = Callable[[int], str]


@dataclass(frozen=True)
class ComputeBuffers:
    """The compute buffer per backend that a graph reserve allocates."""

    sizes: dict[str, int]  # backend name (CUDA0, ..., CPU) -> bytes
    n_nodes: int
    n_splits: int
    # (op, device) -> nodes of the prompt graph on the CPU because that device refused them (Scheduler.refused)
    refused: dict[tuple[str, str], int] = field(default_factory=dict)


def _gpu_buffer_type(name: str, rules: BackendRules, n_tokens_hint: int) -> BufferType:
    def alloc_size(t: Tensor) -> int:
        size = t.nbytes()
        if rules.pads_quantized_rows and t.op == "FLASH_ATTN_EXT":
            # the CUDA MMA kernel (prompt batches) converts quantized K/V to f16 scratch after dst
            q, k, v = t.src[0], t.src[1], t.src[2]
            if q.ne[1] > 1:
                end = size
                if k.type.is_quantized:
                    end = -(-end // 128) * 128 + k.n_elements() * 2
                if v.type.is_quantized and not (v.view_src is k.view_src and v.view_offs == k.view_offs):
                    end = -(-end // 128) * 128 + v.n_elements() * 2
                size = end
        return rules.alloc_size(t.type, size, t.ne[0])

    return BufferType(name, rules.alignment, alloc_size)


def build_graph(
    model: ModelAnatomy,
    r: Resolved,
    kv: KVLayout,
    n_tokens: int,
    n_seqs: int,
    n_outputs: int,
    locate_weight: LocateWeight | None = None,
    locate_layer: LocateLayer | None = None,
) -> GraphContext:
    """One reserve graph. `locate_weight(name, dup)` -> (backend, host_plain); `locate_layer(il)` -> backend."""
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
    swa_of: dict[int, bool] = {}
    for t in kv.tensors:
        where = "host"
        if locate_layer is not None and r.config.offload_kqv:
            where = locate_layer(t.layer)
        tensor = g.weight(t.type, t.ne, f"cache_{t.kind}_l{t.layer}", backend=where, is_weight=False)
        by_layer.setdefault(t.layer, {})[t.kind] = tensor
        swa_of[t.layer] = t.swa
    for il, kinds in by_layer.items():
        caches[(il, swa_of[il])] = (kinds["k"], kinds.get("v"))
    weights = WeightSet(model, caches, g, locate_weight, locate_layer)
    weights._lid = {il: kinds["lid"] for il, kinds in by_layer.items() if "lid" in kinds}
    for il, rs in _rs_tensors(model, r, g, locate_layer).items():
        weights._rs[il] = rs
    ctx = GraphContext(model, shape, weights, g)
    build_model_graph(ctx)
    return ctx


def _rs_tensors(
    model: ModelAnatomy, r: Resolved, g: Graph, locate_layer: LocateLayer | None
) -> dict[int, tuple[Tensor, Tensor]]:
    from planner.recurrent import rs_layout

    out: dict[int, dict[str, Tensor]] = {}
    for t in rs_layout(model, r).tensors:
        where = locate_layer(t.layer) if (locate_layer is not None and r.config.offload_kqv) else "host"
        out.setdefault(t.layer, {})[t.kind] = g.weight(
            t.type, t.ne, f"cache_{t.kind}_l{t.layer}", backend=where, is_weight=False
        )
    return {il: (kinds["r"], kinds["s"]) for il, kinds in out.items()}


def _by_index(buffers: list[str]) -> Callable[[int, Tensor], str]:
    """The buffer the scheduler gave the i-th node (or leaf)."""
    return lambda i, t: buffers[i]


def _backend_name(gpus: list[Device], device: int) -> str:
    return HOST_BUFFER if device == HOST_INDEX else gpus[device].name


def compute_buffers(
    model: ModelAnatomy,
    r: Resolved,
    kv: KVLayout,
    placement: LayerPlacement | None = None,
    gpus: list[Device] | None = None,
    weights: WeightBuffers | None = None,
    op_offload: bool = True,
    run_anyway: frozenset[str] = frozenset(),
) -> ComputeBuffers:
    """Compute buffer per backend for this configuration and device mix. `run_anyway`: ops the GPUs are taken
    to run whatever they answered (what an op on the CPU costs is the difference)."""
    gpus = gpus or []
    placement = placement or LayerPlacement(tuple([HOST_INDEX] * model.n_layer), HOST_INDEX)
    tensor_device = weights.tensor_device if weights else {}
    repacked = weights.repacked if weights else frozenset()
    output_copy = weights.output_copy if weights else placement.output

    def locate_weight(name: str, duplicate: bool) -> tuple[str, bool]:
        device = output_copy if duplicate else tensor_device.get(name, HOST_INDEX)
        return ("host" if device == HOST_INDEX else gpus[device].name), name not in repacked or duplicate

    def locate_layer(il: int) -> str:
        device = placement.layers[il]
        return "host" if device == HOST_INDEX else gpus[device].name

    # an RPC device has no offload_op: ops whose weights stay in host memory are never pulled to it
    backends = [
        SchedBackend(
            d.name,
            False,
            i,
            kind=d.backend,
            supports_offload=d.backend != "rpc",
            max_tensor=d.max_tensor_bytes,
            ops=d.op_support,
            run_anyway=run_anyway,
        )
        for i, d in enumerate(gpus)
    ] + [SchedBackend(HOST_BUFFER, True, HOST_INDEX)]
    # llama_context: pipeline parallelism needs several GPUs holding every layer, the KV cache offloaded,
    # no tensor overrides, and devices with async compute and events (CUDA, ROCm and RPC have them)
    pipeline = (
        len(gpus) > 1
        and r.n_gpu_layers > model.n_layer
        and r.config.offload_kqv
        and not r.config.n_cpu_moe
        and all(d.backend in ("cuda", "rocm", "rpc") for d in gpus)
    )
    scheduler = Scheduler(backends, op_offload=op_offload, n_copies=4 if pipeline else 1)
    buffer_types = {d.name: _gpu_buffer_type(d.name, device_rules(d), r.n_ubatch) for d in gpus}
    # the CPU's compute buffer is the first device's host buffer type, where it has one (llama-context.cpp,
    # llama_context's backend_buft): Vulkan_Host aligns to the device's minMemoryMapAlignment
    host_align = host_alignment(gpus[0]) if gpus else CPU.alignment
    buffer_types[HOST_BUFFER] = BufferType(HOST_BUFFER, host_align, lambda t: t.nbytes())
    backend_index = {b.name: i for i, b in enumerate(backends)}
    full_offload = r.n_gpu_layers > model.n_layer

    scheduled = []
    n_nodes = n_splits = 0
    refused: dict[tuple[str, str], int] = {}
    for i, (tokens, seqs, outputs) in enumerate(reserve_shapes(model, r)):
        ctx = build_graph(model, r, kv, tokens, seqs, outputs, locate_weight, locate_layer)
        if (tokens, seqs, outputs) == (1, 1, 1):  # the one-token graph the speed plan counts: counted once
            graph_counts.note(graph_counts.key_of(model, r), graph_counts.count(ctx.g))
        pin_active = tokens < 32 or full_offload

        def pinned(t: Tensor, pin_active: bool = pin_active) -> int | None:
            if t.pin_layer is None or not pin_active or not gpus:
                return None
            return backend_index[_backend_name(gpus, placement.layers[t.pin_layer])]

        extents = graph_extents(tokens, outputs, kv.cells, kv.cells_swa, kv.n_stream, tokens // kv.n_stream)
        sg = scheduler.split(ctx.g.nodes, ctx.g.leafs, pinned, extents)
        if i == 0:
            n_nodes, n_splits, refused = len(ctx.g.nodes), sg.n_splits, sg.refused
        node_buffers, leaf_buffers = sg.node_backend, sg.leaf_backend
        scheduled.append((sg.nodes, sg.leafs, node_buffers, leaf_buffers))

    sizes = dict.fromkeys(buffer_types, 0)
    for nodes, leafs, node_buffers, leaf_buffers in scheduled:
        result = reserve([(nodes, leafs)], buffer_types, _by_index(node_buffers), _by_index(leaf_buffers))
        for name, size in result.items():
            sizes[name] = max(sizes[name], size)
    return ComputeBuffers(sizes, n_nodes, n_splits, refused)


def reserve_shapes(model: ModelAnatomy, r: Resolved) -> list[tuple[int, int, int]]:
    """The graphs llama_context::sched_reserve reserves, as (tokens, sequences, outputs): the prompt micro-batch,
    the one-token graph, then the prompt graph again with one sequence for the architectures whose inp_diag_decay
    grows with n_seq_tokens^2 ([TAG_RESERVE_DIAG_DECAY]); the buffers keep the largest of each."""
    n_tokens = r.reserve_tokens
    n_seqs = r.n_seq_max
    pp_tokens = -(-n_tokens // n_seqs) * n_seqs
    n_outputs_pp = min(n_tokens, r.n_batch)
    reserves = [(pp_tokens, n_seqs, n_outputs_pp), (n_seqs, n_seqs, n_seqs)]
    if model.architecture in _RESERVE_ONE_SEQUENCE and n_seqs > 1:
        reserves.append((n_tokens, 1, n_outputs_pp))
    return reserves


def estimate_compute(model: ModelAnatomy, r: Resolved) -> int:
    """A rough compute buffer for architectures without a graph builder (named as an estimate).

    The peak of a decoder's reserve graph is the logits of a full micro-batch plus a few
    activations, or, without flash attention, the attention matrix of one layer.
    """
    n_tok = r.reserve_tokens
    logits = model.n_vocab * n_tok * 4
    hidden = model.n_embd * n_tok * 4
    n_head = max((layer.n_head for layer in model.layers), default=0)
    ffn = max((layer.n_ff for layer in model.layers), default=0) * n_tok * 4
    # without a KV cache (encoders, diffusion models) a micro-batch attends only to itself
    span = n_tok if model.no_cache else r.n_ctx_seq
    attn = 0 if r.config.flash_attn else span * n_tok * max(n_head, 1) * 4
    return max(logits + 3 * hidden, attn + 4 * hidden, 3 * ffn + 2 * hidden)
