"""The memory model: bytes per device and on the host for one concrete configuration."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from planner import compute_memo
from planner.backends import CPU, backend_rules, device_rules, host_buffer_extra, host_buffer_name
from planner.config import LoadConfig, Resolved, resolve
from planner.errors import ModelError, PlannerError
from planner.gpu_overhead import Overhead, Workload, gpu_overhead, on_pages
from planner.hardware import Device, Host, MiB
from planner.kv import KVLayout, kv_layout
from planner.model import ModelAnatomy
from planner.op_support import OpsOnCpu
from planner.projector import Projector
from planner.recurrent import rs_layout
from planner.units import HOST_BUFFER
from planner.weights import HOST_INDEX, LayerPlacement, WeightBuffers, place_layers, weight_buffers

# (device, the free bytes it needs, whether it had them) for every fit decision, while recorded
_fit_log: ContextVar[list[tuple[str, int, bool]] | None] = ContextVar("fit_log", default=None)


@contextmanager
def recording_fits() -> Iterator[list[tuple[str, int, bool]]]:
    """Record every fit decision made in this thread meanwhile: free memory enters a plan only
    through them, so they bound the free memory for which the plan stays the same."""
    log: list[tuple[str, int, bool]] = []
    token = _fit_log.set(log)
    try:
        yield log
    finally:
        _fit_log.reset(token)


@dataclass
class Buffer:
    """One buffer llama.cpp allocates, named as in its log."""

    device: str  # CUDA0 ... or CPU (host)
    kind: str  # weights, kv, kv_swa, recurrent, output, compute (projector_weights, projector_compute)
    name: str
    bytes: int
    mapped: bool = False


@dataclass
class DeviceUsage:
    """What a plan puts on one device (or the host), by kind, against what is free there."""

    name: str
    kind: str  # gpu or host
    backend: str
    total: int
    free: int
    margin: int
    weights: int = 0
    weights_mapped: int = 0
    kv: int = 0
    recurrent: int = 0
    output: int = 0
    compute: int = 0
    overhead: int = 0
    # bytes another pool takes out of this one (a unified-memory GPU out of host RAM)
    shared: int = 0
    layers: int = 0
    description: str = ""  # an RPC device's server, HOST:PORT
    remote_cpu: bool = False  # an RPC server's CPU (planner.hardware.Device.remote_cpu)
    max_tensor_bytes: int | None = None  # the device's rule for what stays on the host (Device.max_tensor_bytes)
    # the backend's own cost beside the buffers, with its basis (planner.gpu_overhead); None on the host
    overhead_detail: Overhead | None = None

    @property
    def planned(self) -> int:
        return (
            self.weights + self.weights_mapped + self.kv + self.recurrent + self.output + self.compute + self.overhead
        )

    @property
    def available(self) -> int:
        return self.free - self.margin - self.shared

    @property
    def fits(self) -> bool:
        ok = self.planned <= self.available
        log = _fit_log.get()
        if log is not None:
            log.append((self.name, self.planned + self.margin + self.shared, ok))
        return ok

    @property
    def headroom(self) -> int:
        return self.available - self.planned


@dataclass
class MemoryPlan:
    """Every byte one configuration costs, per device and buffer, and whether it fits."""

    model: ModelAnatomy
    config: LoadConfig
    resolved: Resolved
    placement: LayerPlacement
    kv: KVLayout
    gpus: list[DeviceUsage]
    host: DeviceUsage
    buffers: list[Buffer]
    estimates: list[str] = field(default_factory=list)
    # the vision projector loaded beside the model (its buffers are among `buffers`), so that a plan made
    # again from this one (a retry, the dry run's correction, another context size) keeps it
    projector: Projector | None = None
    # the host CPU's features the plan was made for: which host weights llama.cpp repacks (planner.weights)
    cpu_features: frozenset[str] = frozenset()
    # the model's ops that run on the CPU because a device refused them, and their cost; None: there are none
    ops_on_cpu: OpsOnCpu | None = None

    @property
    def fits(self) -> bool:
        return all(d.fits for d in self.gpus) and self.host.fits

    @property
    def layers_on_gpu(self) -> int:
        """Offloaded units, the output layer included (llama.cpp's n_gpu_layers)."""
        return sum(d.layers for d in self.gpus)

    @property
    def verdict(self) -> str:
        if not self.fits:
            return "no_fit"
        n_units = self.model.n_layer + 1
        if self.layers_on_gpu >= n_units and not self.config.n_cpu_moe:
            return "full_gpu"
        if self.layers_on_gpu > 0:
            return "partial_gpu"
        return "cpu_only"

    @property
    def kv_bytes(self) -> int:
        return sum(t.nbytes for t in self.kv.tensors)


def _add_projector(
    projector: Projector,
    config: LoadConfig,
    gpus: list[Device],
    gpu_usage: list[DeviceUsage],
    host_usage: DeviceUsage,
    buffers: list[Buffer],
    estimates: list[str],
) -> None:
    """libmtmd loads the projector on the first GPU when there is one, else on the host."""
    from planner.projectors.compute import has_vision_graph, is_exact, loaded_tensors, projector_compute

    if gpus:
        rules = device_rules(gpus[0])
        target, name = gpu_usage[0], gpus[0].name
    else:
        rules, target, name = CPU, host_usage, "CPU"
    weights = sum(
        rules.padded(rules.alloc_size(t.type, t.n_bytes, t.shape[0] if t.shape else 1))
        for t in loaded_tensors(projector)
    )
    compute = projector_compute(projector, config.flash_attn, (name, gpus[0].backend, rules) if gpus else None)
    target.weights += weights
    target.compute += compute
    buffers.append(Buffer(name, "projector_weights", name, weights))
    buffers.append(Buffer(name, "projector_compute", name, compute))
    if has_vision_graph(projector) and not is_exact(projector):
        estimates.append(
            f"{name}: the {projector.projector_type} projector's audio encoder adds a compute buffer that is "
            "not modelled (a flat 64 MiB beside its vision graph's)"
        )
    elif not is_exact(projector):
        estimates.append(
            f"{name}: the {projector.projector_type} projector's compute buffer "
            f"({compute // MiB} MiB for {projector.n_patches} patches) is estimated from the encoder's shape"
        )
    elif gpus:
        estimates.append(
            f"{name}: the {projector.projector_type} projector's compute buffer is clip's graphs (warmup, largest "
            f"image) replayed with {gpus[0].backend}'s buffer rules: not yet checked against libmtmd on a GPU"
        )


def default_margin(device: Device | Host) -> int:
    """Safety margin kept free: 256 MiB on a GPU (room for other programs' growth: the backend's own
    overhead is planned, see planner.gpu_overhead), 1 GiB (or 10% if smaller) of host RAM."""
    if isinstance(device, Device) and device.is_gpu:
        return 256 * MiB
    return min(1024 * MiB, device.total // 10)


def _compute_sizes(
    model: ModelAnatomy,
    r: Resolved,
    kv: KVLayout,
    placement: LayerPlacement,
    gpus: list[Device],
    wb: WeightBuffers,
    op_offload: bool,
    run_anyway: frozenset[str] = frozenset(),
) -> dict[str, int]:
    """The compute buffer per backend; beside them, under keys that start with "#", the prompt graph's splits
    ("#splits") and the nodes the devices refused ("#refused OP DEVICE"), which the memo keeps with them."""

    def price() -> dict[str, int]:
        from planner.compute import compute_buffers  # the graph builders: only when a size is not known

        result = compute_buffers(model, r, kv, placement, gpus, wb, op_offload=op_offload, run_anyway=run_anyway)
        out = dict(result.sizes)
        out["#splits"] = result.n_splits
        for (op, device), n in result.refused.items():
            out[f"#refused {op} {device}"] = n
        return out

    if not compute_memo.active():
        return price()
    key = compute_memo.size_key(model, r, placement, gpus, wb, op_offload, run_anyway)
    return compute_memo.remembered(key, price)


def _ops_on_cpu(
    model: ModelAnatomy,
    r: Resolved,
    kv: KVLayout,
    placement: LayerPlacement,
    gpus: list[Device],
    wb: WeightBuffers,
    op_offload: bool,
    priced: dict[str, int],
) -> OpsOnCpu | None:
    """The ops the devices refused (from the priced sizes' "#refused" entries), with their cost: the plan priced
    again with the devices running them."""
    refused = []
    for key, n in priced.items():
        if key.startswith("#refused "):
            _, op, device = key.split(" ", 2)
            refused.append((op, device, n))
    if not refused:
        return None
    ops = frozenset(op for op, _, _ in refused)
    anyway = _compute_sizes(model, r, kv, placement, gpus, wb, op_offload, ops)
    devices = sorted({device for _, device, _ in refused})
    return OpsOnCpu(
        tuple(sorted(refused)),
        priced.get("#splits", 0),
        anyway.get("#splits", 0),
        priced.get(HOST_BUFFER, 0) - anyway.get(HOST_BUFFER, 0),
        tuple((d, priced.get(d, 0) - anyway.get(d, 0)) for d in devices),
    )


def gpu_workload(
    model: ModelAnatomy, r: Resolved, kv: KVLayout, wb: WeightBuffers, placement: LayerPlacement, idx: int, d: Device
) -> Workload:
    """What the runtime's memory on GPU `idx` depends on: the graph's kind, the quantized matrices there
    (only where ggml-cuda may unpack them: planner.cuda_paths) and, without flash attention, the
    attention layers whose cache is there."""
    from planner import cuda_paths

    experts = model.n_expert > 0
    work = Workload(r.config.flash_attn, experts, r.reserve_tokens)
    if d.backend not in ("cuda", "rocm"):
        return work
    cc = cuda_paths.parse_cc(d.compute_capability)
    weights: tuple[cuda_paths.MatrixWeight, ...] = ()
    if cc is not None and not (cuda_paths.is_nvidia(cc) and cc >= cuda_paths.TURING):
        on_device = [name for name, where in wb.tensor_device.items() if where == idx]
        # the layers' matrices: the output matrix multiplies one token (llama_batch_get_one asks for the last
        # token's logits only), so MMVQ takes it
        by_name = {t.name: t for layer in model.layers for t in layer.tensors}
        found = []
        for name in on_device:
            t = by_name.get(name)
            if t is not None and t.type.is_quantized and len(t.shape) >= 2:
                shape = (*t.shape, 1, 1)
                found.append(cuda_paths.MatrixWeight(t.type, (shape[0], shape[1], shape[2])))
        weights = tuple(found)
    attention: tuple[cuda_paths.AttentionShape, ...] = ()
    if not r.config.flash_attn and r.config.offload_kqv:
        shapes = []
        for layer in model.trunk_layers:
            if not layer.caches_kv or placement.layers[layer.index] != idx:
                continue
            k = next((t for t in kv.for_layer(layer.index) if t.kind == "k"), None)
            cells = kv.cells_swa if (layer.is_swa and kv.cells_swa) else kv.cells
            shapes.append(
                cuda_paths.AttentionShape(
                    cells,
                    layer.n_head,
                    layer.n_head_kv,
                    layer.head_dim_k,
                    layer.head_dim_v,
                    bool(k is not None and k.type.is_quantized),
                )
            )
        attention = tuple(shapes)
    n_used = model.experts.n_used if model.experts else 0
    return Workload(r.config.flash_attn, experts, r.reserve_tokens, weights, attention, n_used)


def plan_memory(
    model: ModelAnatomy,
    config: LoadConfig,
    gpus: list[Device],
    host: Host,
    margins: dict[str, int] | None = None,
    with_compute: bool = True,
    projector: Projector | None = None,
) -> MemoryPlan:
    """Every buffer llama.cpp will allocate for `config`, placed on `gpus` and the host.

    with_compute=False skips the compute buffers (the costly part): a lower bound the
    solver uses to rule candidates out cheaply. A header whose tensors do not fit
    together (llama.cpp would refuse it) ends in a ModelError, never a crash.
    """
    try:
        return _plan_memory(model, config, gpus, host, margins, with_compute, projector)
    except PlannerError:
        raise
    except (ArithmeticError, ValueError, IndexError, KeyError, AssertionError, TypeError, RecursionError) as exc:
        raise ModelError(
            model.path, f"the model's tensors and hyper-parameters do not fit together ({type(exc).__name__}: {exc})"
        ) from None


def _plan_memory(
    model: ModelAnatomy,
    config: LoadConfig,
    gpus: list[Device],
    host: Host,
    margins: dict[str, int] | None,
    with_compute: bool,
    projector: Projector | None,
) -> MemoryPlan:
    margins = margins or {}
    r = resolve(model, config)
    # a GPU backend is created (and used for offloaded ops) unless nothing at all goes there
    gpus_used = gpus if (r.n_gpu_layers > 0 or config.op_offload) else []
    placement = place_layers(model, r, gpus_used)
    kv = kv_layout(model, r)
    wb = weight_buffers(model, r, placement, gpus_used, host.cpu_features)
    compute_sizes: dict[str, int] = {}
    estimated_compute = False
    ops_on_cpu: OpsOnCpu | None = None
    if with_compute:
        try:
            if model.no_cache:
                raise PlannerError("no graph builder for an architecture without a KV cache")
            priced = _compute_sizes(model, r, kv, placement, gpus_used, wb, config.op_offload)
            compute_sizes = {name: size for name, size in priced.items() if not name.startswith("#")}
            ops_on_cpu = _ops_on_cpu(model, r, kv, placement, gpus_used, wb, config.op_offload, priced)
        except PlannerError:
            if model.exact:
                raise
            # no graph builder fits this architecture: a rough figure, on the device of the output layer
            estimated_compute = True
            where = HOST_BUFFER if placement.output == HOST_INDEX or not gpus_used else gpus_used[placement.output].name
            from planner.compute import estimate_compute

            compute_sizes = {where: estimate_compute(model, r)}

    gpu_usage = [
        DeviceUsage(
            d.name,
            "gpu",
            d.backend,
            d.total,
            d.free,
            margins.get(d.name, default_margin(d)),
            description=d.description,
            remote_cpu=d.remote_cpu,
            max_tensor_bytes=d.max_tensor_bytes,
        )
        for d in gpus
    ]
    host_usage = DeviceUsage("CPU", "host", "cpu", host.total, host.free, margins.get("CPU", default_margin(host)))
    buffers: list[Buffer] = []
    estimates: list[str] = []

    # weights
    for idx, size in wb.gpu.items():
        gpu_usage[idx].weights += size
        buffers.append(Buffer(gpus[idx].name, "weights", gpus[idx].name, size))
    for name, size in wb.host.items():
        mapped = name.startswith("CPU_Mapped")
        if mapped:
            host_usage.weights_mapped += size
        else:
            host_usage.weights += size
        buffers.append(Buffer("CPU", "weights", name, size, mapped=mapped))
    for idx, usage in enumerate(gpu_usage):
        usage.layers = placement.layers_on(idx) if gpus_used else 0

    # KV cache: one buffer per device and cache (the sliding-window layers have their own cache)
    kv_by: dict[tuple[int, bool], int] = {}
    for t in kv.tensors:
        device = placement.layers[t.layer] if (r.config.offload_kqv and gpus_used) else HOST_INDEX
        rules = CPU if device == HOST_INDEX else device_rules(gpus[device])
        size = rules.padded(rules.alloc_size(t.type, t.nbytes, t.ne[0]))
        kv_by[(device, t.swa)] = kv_by.get((device, t.swa), 0) + size
    for (device, swa), size in sorted(kv_by.items()):
        target = host_usage if device == HOST_INDEX else gpu_usage[device]
        target.kv += size
        name = "CPU" if device == HOST_INDEX else gpus[device].name
        buffers.append(Buffer(name, "kv_swa" if swa else "kv", name, size))

    # recurrent state: F32 per recurrent layer, on the layer's device
    rs_by: dict[int, int] = {}
    for state in rs_layout(model, r).tensors:
        device = placement.layers[state.layer] if (r.config.offload_kqv and gpus_used) else HOST_INDEX
        rules = CPU if device == HOST_INDEX else device_rules(gpus[device])
        rs_by[device] = rs_by.get(device, 0) + rules.padded(rules.alloc_size(state.type, state.nbytes, state.ne[0]))
    for device, size in sorted(rs_by.items()):
        target = host_usage if device == HOST_INDEX else gpu_usage[device]
        target.recurrent += size
        name = "CPU" if device == HOST_INDEX else gpus[device].name
        buffers.append(Buffer(name, "recurrent", name, size))

    # output (logits) buffer: host, pinned when a GPU backend exists
    output = model.n_vocab * 4 * max(1, r.n_seq_max)
    host_usage.output = output
    # the output buffer: the host buffer type of the output layer's device (llama-context.cpp, output_reserve:
    # model.dev_output()); the CPU's compute buffer: the first device's (llama_context's backend_buft)
    output_device = gpus[placement.output] if gpus_used and placement.output != HOST_INDEX else None
    output_name = host_buffer_name(output_device)
    output += host_buffer_extra(output_name)
    host_usage.output = output
    buffers.append(Buffer("CPU", "output", output_name, output))
    host_name = host_buffer_name(gpus[0]) if gpus_used else "CPU"

    # compute buffers
    for name, size in compute_sizes.items():
        if name == HOST_BUFFER:
            size += host_buffer_extra(host_name) if size else 0
            host_usage.compute += size
            buffers.append(Buffer("CPU", "compute", host_name, size))
        else:
            idx = next(i for i, d in enumerate(gpus) if d.name == name)
            gpu_usage[idx].compute += size
            buffers.append(Buffer(name, "compute", name, size))

    for idx, d in enumerate(gpus_used):
        if d.backend == "rpc":
            continue  # the server's own backend context is already out of the free memory it reports
        ovh = gpu_overhead(d, gpu_workload(model, r, kv, wb, placement, idx, d))
        usage = gpu_usage[idx]
        usage.overhead_detail = ovh
        # the driver holds each buffer in whole pages: what it takes beyond the buffers' bytes
        paging = sum(on_pages(b.bytes) - b.bytes for b in buffers if b.device == d.name) if ovh.measured else 0
        usage.overhead = ovh.total + paging
        if ovh.estimate:
            estimates.append(
                f"{d.name}: backend overhead (driver context, library workspaces), which llama.cpp does not "
                f"report: {ovh.source}"
            )
        else:
            estimates.append(f"{d.name}: backend overhead {ovh.total // MiB} MiB: {ovh.source}")
        if not backend_rules(d.backend).verified:
            estimates.append(
                f"{d.name}: {d.backend} compute buffers come from a model of ggml's scheduler "
                "that has not yet been checked against a real GPU build"
            )
        if d.unified:
            host_usage.shared += gpu_usage[idx].planned
    if projector is not None:
        _add_projector(projector, config, gpus_used, gpu_usage, host_usage, buffers, estimates)
    if not model.exact:
        estimates.extend(model.notes)
    if estimated_compute:
        estimates.append(
            "compute buffers are a rough estimate (logits, activations and attention of one "
            "micro-batch): this architecture's graph is not modelled yet"
        )
    return MemoryPlan(
        model,
        config,
        r,
        placement,
        kv,
        gpu_usage,
        host_usage,
        buffers,
        estimates,
        projector,
        host.cpu_features,
        ops_on_cpu,
    )
