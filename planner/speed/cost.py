"""What one decoded token costs a plan, per device: the bytes it reads, the weights it multiplies and the
operations it runs (TokenCost, from a MemoryPlan by `token_cost`). No machine's figure is in it: a cost is
the plan's own, kept with it in the plan cache (`to_json`), and planner.speed.timing prices it.

llama.cpp runs the whole graph once per token. Every weight matrix of the layers a device holds is read once:
its bytes as stored (a q4_K matrix reads 4.5 bits a weight). `token_embd` is looked up,
not multiplied: one row a token. The output matrix (or, when tied, `token_embd` again as a
matrix) is read whole on the device of the output layer. A mixture-of-experts layer reads
only the experts the router picks: each `*_exps` tensor counts expert_used_count /
expert_count of its bytes; shared experts (`*_shexp`) and dense parts count whole.
The KV cache is read up to the filled cells: at a fill of n tokens each attention layer
reads n cells (padded to llama.cpp's 256) of K and V, a sliding-window layer at most its
window's cells; recurrent layers read and write their state.

The operations are counted on the one-token graph llama.cpp builds (planner.graph_counts: the compute
pricing notes them; `OPS_PER_LAYER_GUESS` a layer where no graph builder knows the architecture) and shared
between the devices by the layers each holds. A token passes the host (its input), then the layers in
order, then the output layer's device: each change of device on the way is a hand-over (a split).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any

from planner.hardware import Device
from planner.memory import MemoryPlan
from planner.model import ModelAnatomy
from planner.recurrent import rs_layout
from planner.speed.machine import REPACKED
from planner.units import EXPERT_TENSOR, round_up
from planner.weights import HOST_INDEX, weight_buffers

KV_PAD = 256  # llama.cpp pads the cells attention reads to a multiple of 256
OPS_PER_LAYER_GUESS = 25  # operations of a layer where no graph builder knows the architecture
_EXPERT_RE = re.compile(EXPERT_TENSOR)


@dataclass
class DeviceCost:
    """What one decoded token reads and computes on one device (the host is "CPU")."""

    name: str
    backend: str  # cpu, cuda, rocm, metal, vulkan, rpc
    weights: dict[str, int] = field(default_factory=dict)  # ggml type -> bytes read per token
    output_bytes: int = 0  # of which the output matrix (prefill reads it once per prompt)
    output_type: str = ""
    params: dict[str, int] = field(default_factory=dict)  # ggml type -> weights multiplied per token
    rows: int = 0  # matrix rows a token streams (each costs CpuSpeed.row_seconds beyond the cache)
    output_rows: int = 0  # of which the output matrix's
    output_params: int = 0
    kv_cell: dict[str, int] = field(default_factory=dict)  # K/V type -> bytes per cell, full-context layers
    kv_cell_swa: dict[str, int] = field(default_factory=dict)  # the same, sliding-window layers
    attn_heads: dict[str, int] = field(default_factory=dict)  # head width -> query heads, full-context layers
    attn_heads_swa: dict[str, int] = field(default_factory=dict)  # the same, sliding-window layers
    # "width/KV heads" -> layers of that shape: what decides a cache's cost when it comes from memory
    attn_layouts: dict[str, int] = field(default_factory=dict)  # full-context layers
    attn_layouts_swa: dict[str, int] = field(default_factory=dict)  # sliding-window layers
    state_bytes: int = 0  # recurrent state read and written per token
    layers: int = 0
    ops: int = 0  # graph operations a token runs here
    mat_muls: int = 0  # of which mat-muls (each costs CpuSpeed.mat_mul_seconds more)
    elements: dict[str, int] = field(default_factory=dict)  # their elements between the mat-muls, by kind
    params_log_width: dict[str, float] = field(default_factory=dict)  # ggml type -> sum of params x log2(row)

    @property
    def is_host(self) -> bool:
        return self.backend == "cpu"

    def weight_bytes(self) -> int:
        return sum(self.weights.values())

    def kv_bytes(self, cells: int, cells_swa: int) -> int:
        return cells * sum(self.kv_cell.values()) + cells_swa * sum(self.kv_cell_swa.values())

    def to_json(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeviceCost:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class TokenCost:
    """A plan's per-token cost: everything the speed formula needs but the machine's figures."""

    devices: list[DeviceCost]  # in the order a token passes them (host first, as llama.cpp's layers)
    n_vocab: int
    n_embd: int
    n_ctx: int
    n_ubatch: int
    cells: int  # KV cells of the full-context cache
    cells_swa: int  # KV cells of the sliding-window cache (0: none)
    splits: list[str] = field(default_factory=list)  # backend of each hand-over between devices
    n_swa: int = 0  # the sliding window's length (0: none, or unknown in a cost kept before)
    ops_exact: bool = True  # the operations were counted on the graph llama.cpp builds
    notes: list[str] = field(default_factory=list)
    # the GPUs llama.cpp hands a prompt's mat-muls of host weights to (op offload: a batch of
    # OP_OFFLOAD_MIN_BATCH tokens or more), even with no layer on them
    prompt_offload: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "devices"}
        data["devices"] = [d.to_json() for d in self.devices]
        data["splits"], data["notes"] = list(self.splits), list(self.notes)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenCost:
        known = set(cls.__dataclass_fields__) - {"devices"}  # a cost kept before a field was added has its default
        fields = {k: data[k] for k in known & set(data)}
        return cls(devices=[DeviceCost.from_json(d) for d in data["devices"]], **fields)

    def cells_at(self, fill: int) -> tuple[int, int]:
        """The cells of the cache's view at a fill of `fill` tokens, padded to KV_PAD as llama.cpp hands
        them to attention: (full-context cache, sliding-window cache)."""
        padded = min(self.cells, round_up(max(fill, 1), KV_PAD)) if self.cells else 0
        return padded, min(self.cells_swa, padded) if self.cells_swa else 0

    def visible_at(self, seen: float) -> tuple[float, float]:
        """The cells a query at `seen` tokens attends to (the mask hides the rest of the view, and a
        sliding-window layer's cells beyond its window): (full-context cache, sliding-window cache)."""
        full = min(self.cells, seen) if self.cells else 0.0
        window = self.n_swa or self.cells_swa
        return full, min(self.cells_swa, window, seen) if self.cells_swa else 0.0


def _graph_counts(plan: MemoryPlan) -> tuple[int, int, dict[str, int]] | None:
    """Operations a one-token graph runs (views and reshapes cost nothing), of which mat-muls, and the
    elements its operations between the mat-muls produce, by kind (ELEMENTWISE_KINDS), from the graph
    llama.cpp builds; None where no graph builder knows the architecture. The compute pricing builds the same
    graph and notes its counts (planner.graph_counts): it is built here only where it did not."""
    from planner import graph_counts

    m, r = plan.model, plan.resolved
    key = graph_counts.key_of(m, r)
    known, counts = graph_counts.noted(key)
    if not known:
        from planner.compute import build_graph  # the graph builders: only when a count is not known
        from planner.errors import PlannerError

        try:
            counts = graph_counts.count(build_graph(m, r, plan.kv, 1, 1, 1).g)
        except (PlannerError, ArithmeticError, ValueError, KeyError, IndexError, TypeError, AttributeError):
            counts = None
        graph_counts.note(key, counts)
    return counts


def _expert_share(model: ModelAnatomy, layer: int) -> float:
    experts = model.experts
    if experts is None or not experts.n_expert:
        return 1.0
    used = experts.n_used
    if experts.n_used_per_layer and layer < len(experts.n_used_per_layer):
        used = experts.n_used_per_layer[layer] or used
    return min(1.0, used / experts.n_expert)


def _elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def token_cost(plan: MemoryPlan) -> TokenCost:
    """Bytes read, weights multiplied and operations run per decoded token, per device (see the module)."""
    m, r = plan.model, plan.resolved
    # the devices as planned, with the rule that keeps a tensor too large for one on the host
    gpus = [Device(d.name, "gpu", d.backend, d.total, d.free, max_tensor_bytes=d.max_tensor_bytes) for d in plan.gpus]
    gpus_used = gpus if (r.n_gpu_layers > 0 or r.config.op_offload) else []
    wb = weight_buffers(m, r, plan.placement, gpus_used, plan.cpu_features)
    host = DeviceCost("CPU", "cpu")
    devices = [DeviceCost(d.name, d.backend) for d in gpus]

    def on(index: int) -> DeviceCost:
        return host if index == HOST_INDEX or not gpus_used else devices[index]

    def read(
        target: DeviceCost, type_name: str, nbytes: float, params: float, output: bool = False, rows: float = 0
    ) -> None:
        target.weights[type_name] = target.weights.get(type_name, 0) + round(nbytes)
        target.rows += round(rows)
        if output:
            target.output_bytes += round(nbytes)
            target.output_type = type_name
            target.output_params += round(params)
            target.output_rows += round(rows)
        elif params:
            target.params[type_name] = target.params.get(type_name, 0) + round(params)
            width = params / rows if rows else 1.0
            book = target.params_log_width
            book[type_name] = book.get(type_name, 0.0) + params * math.log2(max(width, 1.0))

    def type_of(t: Any) -> str:
        """The weight's type, marked where llama.cpp repacks it for this CPU (its kernels differ)."""
        name = str(t.type.name)
        return name + REPACKED if t.name in wb.repacked else name

    for t in m.input_tensors:  # looked up: one row a token
        rows = t.shape[1] if len(t.shape) > 1 else 1
        read(host, t.type.name, t.n_bytes / max(rows, 1), 0)
    for layer in m.layers:
        if layer.is_mtp:
            continue
        share = _expert_share(m, layer.index)
        for t in layer.tensors:
            target = on(wb.tensor_device.get(t.name, HOST_INDEX))
            fraction = share if _EXPERT_RE.search(t.name) else 1.0
            matrix = len(t.shape) >= 2 and not t.name.endswith(".bias")
            params = _elements(t.shape) * fraction if matrix else 0
            read(target, type_of(t), t.n_bytes * fraction, params, rows=params / t.shape[0] if matrix else 0)
    for t in m.other_tensors:
        read(on(wb.tensor_device.get(t.name, HOST_INDEX)), t.type.name, t.n_bytes, 0)
    # the output matmul runs where its weight lives: a matrix over a device's largest tensor stays on the
    # host (planner.weights), and a tied output's copy is the embedding itself there (wb.output_copy)
    out_device = on(plan.placement.output)
    for t in m.output_tensors:
        matrix = len(t.shape) >= 2
        target = on(wb.tensor_device.get(t.name, plan.placement.output))
        rows = _elements(t.shape) // t.shape[0] if matrix else 0
        read(target, type_of(t), t.n_bytes, _elements(t.shape) if matrix else 0, output=matrix, rows=rows)
    if m.tied_output:
        embd = m.tensor("token_embd.weight")
        if embd is not None:
            copy = out_device if m.output_is_token_embd else on(wb.output_copy)
            rows = _elements(embd.shape) // embd.shape[0]
            read(copy, embd.type.name, embd.n_bytes, _elements(embd.shape), output=True, rows=rows)

    by_layer = {layer.index: layer for layer in m.layers}
    for kt in plan.kv.tensors:
        target = on(plan.placement.layers[kt.layer] if r.config.offload_kqv else HOST_INDEX)
        cell = kt.type.row_bytes(kt.ne[0])  # one cell of one sequence's stream
        book = target.kv_cell_swa if kt.swa else target.kv_cell
        book[kt.type.name] = book.get(kt.type.name, 0) + cell
        layer = by_layer[kt.layer]
        if kt.kind == "k":
            width = str((layer.head_dim_k + (layer.head_dim_v or layer.head_dim_k)) // 2)
            heads = target.attn_heads_swa if kt.swa else target.attn_heads
            heads[width] = heads.get(width, 0) + layer.n_head
            layouts = target.attn_layouts_swa if kt.swa else target.attn_layouts
            shape = f"{width}/{layer.n_head_kv}"
            layouts[shape] = layouts.get(shape, 0) + 1
    for st in rs_layout(m, r).tensors:
        target = on(plan.placement.layers[st.layer] if r.config.offload_kqv else HOST_INDEX)
        target.state_bytes += 2 * st.nbytes // max(r.n_seq_max, 1)  # read, then written back

    for il, index in enumerate(plan.placement.layers):
        if not by_layer[il].is_mtp:
            on(index).layers += 1
    counts = _graph_counts(plan)
    notes = []
    elements: dict[str, int]
    if counts is None:
        ops, mat_muls, elements = OPS_PER_LAYER_GUESS * m.n_trunk + 8, 0, {}
        notes.append(f"graph operations estimated ({OPS_PER_LAYER_GUESS} a layer): no graph builder for this model")
    else:
        ops, mat_muls, elements = counts
    share = 1 / max(m.n_trunk, 1)
    for d in [host, *devices]:
        d.ops = round(ops * share * d.layers)
        d.mat_muls = round(mat_muls * share * d.layers)
        d.elements = {kind: round(n * share * d.layers) for kind, n in elements.items()}
    out_device.ops += max(ops - sum(d.ops for d in [host, *devices]), 0)
    out_device.mat_muls += max(mat_muls - sum(d.mat_muls for d in [host, *devices]), 0)
    for kind, n in elements.items():
        out_device.elements[kind] = out_device.elements.get(kind, 0) + max(
            n - sum(d.elements.get(kind, 0) for d in [host, *devices]), 0
        )

    # a token passes the host (input), then the layers in order, then the output layer's device
    order: list[DeviceCost] = [host]
    for index in [*plan.placement.layers, plan.placement.output]:
        d = on(index)
        if d is not order[-1]:
            order.append(d)
    splits = [b.backend if b.backend != "cpu" else a.backend for a, b in itertools.pairwise(order)]
    on_cpu = plan.ops_on_cpu
    if on_cpu is not None and on_cpu.splits > on_cpu.splits_on_device:
        # ops a device refused run on the CPU: each one more hand-over there and back (their own time there
        # is not priced: the CPU's rate for an op it runs alone is not probed)
        refusing = next((d.backend for d in plan.gpus if d.name == on_cpu.ops[0][1]), "vulkan")
        splits += [refusing] * (on_cpu.splits - on_cpu.splits_on_device)
        notes.append(
            f"{on_cpu.splits - on_cpu.splits_on_device} more hand-overs between devices a token: "
            f"{', '.join(sorted({op for op, _, _ in on_cpu.ops}))} on the CPU (its time there is not priced)"
        )
    used = [host] + [d for d in devices if d.weights or d.layers]
    repacked = sum(t.n_bytes for t in _all_tensors(m) if t.name in wb.repacked)
    if repacked:
        notes.append(
            f"{repacked / 2**20:.0f} MiB of host weights run repacked for this CPU (CPU_REPACK), "
            "at the rates the probe timed repacked"
        )
    return TokenCost(
        used,
        m.n_vocab,
        m.n_embd,
        r.n_ctx,
        r.n_ubatch,
        plan.kv.cells if plan.kv.tensors else 0,
        plan.kv.cells_swa if any(t.swa for t in plan.kv.tensors) else 0,
        splits,
        n_swa=m.n_swa if any(t.swa for t in plan.kv.tensors) else 0,
        ops_exact=not notes or not notes[0].startswith("graph"),
        notes=notes,
        prompt_offload=[d.name for d in gpus_used if d.backend != "rpc"] if r.config.op_offload else [],
    )


def _all_tensors(model: ModelAnatomy) -> list[Any]:
    out = list(model.input_tensors) + list(model.output_tensors) + list(model.other_tensors)
    for layer in model.layers:
        out += layer.tensors
    return out
