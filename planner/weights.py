"""Where each weight goes and how big the model buffers are (llama_model::load_tensors).

Layers are assigned to devices the way llama.cpp does it: the last
`n_gpu_layers` units (the repeating layers, then the output layer as unit
n_layer) go to the GPUs, split by free memory or `tensor_split`; the input
layer (token embeddings) always stays on the host. Host weights are either
memory-mapped from the file (one buffer spanning their file range) or, for
matrices the CPU repacks for its SIMD units, copied into a CPU_REPACK buffer.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from planner.backends import CPU, BackendRules, device_rules
from planner.config import Resolved
from planner.gguf import TensorInfo
from planner.gpu_ops import LOOKUP_TABLES, weight_supported
from planner.hardware import Device
from planner.model import ModelAnatomy
from planner.units import EXPERT_TENSOR

HOST_INDEX = -1  # the host among device indices (the layer placement's "not on a GPU")


@dataclass(frozen=True)
class LayerPlacement:
    """Device index per repeating layer, and for the output layer (-1 = host)."""

    layers: tuple[int, ...]
    output: int

    def layers_on(self, device: int) -> int:
        return sum(1 for d in self.layers if d == device) + (1 if self.output == device else 0)


def place_layers(model: ModelAnatomy, r: Resolved, gpus: list[Device]) -> LayerPlacement:
    n_layer = model.n_layer
    ngl = r.n_gpu_layers if gpus else 0
    i_gpu_start = max(n_layer + 1 - ngl, 0)
    act = min(ngl, n_layer + 1)
    weights = list(r.config.tensor_split[: len(gpus)]) if r.config.tensor_split else []
    if not weights or not any(weights):
        weights = [float(d.free) if (d.free or d.total) else 1.0 for d in gpus]
    total = sum(weights) or 1.0
    cumulative, acc = [], 0.0
    for value in weights:
        acc += value
        cumulative.append(acc / total)

    def device_of(il: int) -> int:
        if il < i_gpu_start or il - i_gpu_start >= act:
            return HOST_INDEX
        return min(bisect.bisect_right(cumulative, (il - i_gpu_start) / act), len(gpus) - 1)

    return LayerPlacement(tuple(device_of(il) for il in range(n_layer)), device_of(n_layer))


# --- CPU extra buffer types (llama-model.cpp: make_cpu_buft_list, use_extra_bufts) ----------


def has_amx(features: frozenset[str]) -> bool:
    """The CPU backend runs AMX kernels: its first extra buffer type is AMX (ggml-cpu.cpp)."""
    return "amx_int8" in features


def uses_cpu_extra_buffers(config_value: bool | None, features: frozenset[str]) -> bool:
    """Whether host weights may go to the CPU's extra buffer types (CPU_REPACK, AMX).

    None means vramchat's default: on, except on AMX CPUs, where this build's AMX kernels
    crashed the demo's first decode (segfault) and a deepseek2 context (GGML_ASSERT in the
    scheduler); without extra buffer types both run. A user can turn them on again.
    """
    if config_value is not None:
        return config_value
    return not has_amx(features)


# --- CPU weight repacking (ggml-cpu/repack.cpp: ggml_repack_get_optimal_repack_type) ---------


def repack_eligible(info: TensorInfo, features: frozenset[str]) -> bool:
    """Whether the CPU backend moves this matrix into its CPU_REPACK buffer."""
    dims = len([d for d in info.shape])
    op_dims = 3 if info.name.endswith("_exps.weight") else 2
    if dims != op_dims or info.name.endswith(".bias"):
        return False
    ne1 = info.shape[1] if len(info.shape) > 1 else 1
    t = info.type.name
    avx2, avx512 = "avx2" in features, "avx512" in features
    neon = "neon" in features
    dotprod, i8mm = "dotprod" in features, "i8mm" in features
    if t == "q4_0":
        return (avx2 and ne1 % 8 == 0) or (neon and (i8mm or dotprod) and ne1 % 4 == 0)
    if t == "q4_K":
        return (avx2 or (neon and (i8mm or dotprod))) and ne1 % 8 == 0
    if t == "q2_K":
        return avx512 and ne1 % 8 == 0
    if t in ("q5_K", "q6_K"):
        return neon and (i8mm or dotprod) and ne1 % 8 == 0
    if t in ("iq4_nl", "mxfp4"):
        return (avx2 and ne1 % 8 == 0) or (neon and dotprod and ne1 % 4 == 0)
    if t in ("q8_0", "q1_0"):
        return neon and (i8mm or dotprod) and ne1 % 4 == 0
    return False


# --- the AMX buffer (ggml-cpu/amx/amx.cpp: supports_op; mmq.cpp: get_alloc_size) -------------
# Intel AMX CPUs put the matrices of plain matmuls into an AMX buffer first, repacked into tiles
# with per-block extras; what AMX refuses then goes to CPU_REPACK or the plain CPU buffer.

AMX_ALIGNMENT = 32  # TENSOR_ALIGNMENT: each tensor's size is padded to it in the buffer
# type -> (row length ne[0] must be a multiple of, extra bytes per block in the packed layout)
_AMX_TYPES = {
    "q4_0": (32, 0),
    "q4_1": (32, 0),
    "q8_0": (32, 4),
    "q4_K": (256, 4),
    "q5_K": (256, 4),
    "q6_K": (256, 0),
    "iq4_xs": (256, 2),
    "f16": (16, 0),
}


def amx_bytes(info: TensorInfo) -> int | None:
    """The tensor's bytes in the AMX buffer, or None when AMX refuses it.

    Only weights whose op is MUL_MAT qualify (not the experts' MUL_MAT_ID, not embedding lookups),
    with ne[1] a multiple of 32 and ne[0] a multiple of the type's alignment. The packed size counts
    one ne[1] x ne[0] slice whatever ne[2] is, as this build's get_alloc_size does.
    """
    spec = _AMX_TYPES.get(info.type.name)
    if spec is None or not _is_matmul_weight(info) or _EXPERT_RE.search(info.name):
        return None
    if info.name in LOOKUP_TABLES or info.name.endswith(("_exps.weight", ".weight_scale")):
        return None
    align, extra = spec
    ne0, ne1 = info.shape[0], info.shape[1]
    if ne1 % 32 or ne0 % align:
        return None
    if info.type.name == "f16":
        size = info.n_bytes  # not packed
    else:
        size = ne1 * (ne0 // info.type.block_size) * (info.type.type_size + extra)
    return (size + AMX_ALIGNMENT - 1) // AMX_ALIGNMENT * AMX_ALIGNMENT


# common.h's LLM_FFN_EXPS_REGEX: the routed experts' matrices
_EXPERT_RE = re.compile(EXPERT_TENSOR)


def _is_matmul_weight(info: TensorInfo) -> bool:
    return len(info.shape) >= 2 and not info.name.endswith(".bias")


@dataclass
class WeightBuffers:
    """Model buffers per device, named as llama.cpp names them in its log."""

    # device index -> bytes (GPU buffers)
    gpu: dict[int, int] = field(default_factory=dict)
    # host buffers: name -> bytes (CPU_Mapped per file shard, CPU_REPACK, CPU)
    host: dict[str, int] = field(default_factory=dict)
    host_mapped: int = 0  # part of `host` that is mmapped file range
    # tensors per device (for the compute model: which weights live where)
    tensor_device: dict[str, int] = field(default_factory=dict)
    # host tensors moved into the CPU_REPACK buffer
    repacked: set[str] = field(default_factory=set)
    # where a tied output's copy of the token embedding lives: the output layer's device, or the host where
    # that device cannot run its matmul (then it is the embedding itself, llama.cpp's TENSOR_DUPLICATED)
    output_copy: int = HOST_INDEX

    @property
    def host_allocated(self) -> int:
        return sum(self.host.values()) - self.host_mapped


def weight_buffers(
    model: ModelAnatomy, r: Resolved, placement: LayerPlacement, gpus: list[Device], cpu_features: frozenset[str]
) -> WeightBuffers:
    out = WeightBuffers()
    gpu_rules: list[BackendRules] = [device_rules(d) for d in gpus]
    host_default: list[TensorInfo] = []
    repack_bytes = 0
    amx_total = 0
    use_mmap = r.config.use_mmap
    # With a CUDA/ROCm/Vulkan device, host weights select the device's pinned host buffer type first
    # (supported for every op), and with mmap that becomes the plain CPU buffer: nothing is repacked.
    can_repack = not any(d.backend in ("cuda", "rocm", "vulkan") for d in gpus) and uses_cpu_extra_buffers(
        r.config.cpu_extra_buffers, cpu_features
    )
    amx = can_repack and has_amx(cpu_features)

    def extra_buffer(info: TensorInfo) -> bool:
        """Put a host matrix into the first extra buffer type that takes it (AMX, then CPU_REPACK)."""
        nonlocal repack_bytes, amx_total
        size = amx_bytes(info) if amx else None
        if size is not None:
            amx_total += size
            return True
        if repack_eligible(info, cpu_features):
            repack_bytes += CPU.padded(info.n_bytes)
            return True
        return False

    def supported_on(device: int, name: str, info: TensorInfo, matmul: bool) -> bool:
        """llama.cpp's weight_buft_supported for the GPU `device` (the tensor read as `name`)."""
        return weight_supported(
            gpus[device].backend,
            model.architecture,
            name,
            info.shape,
            model.ssm,
            n_bytes=info.n_bytes,
            matmul=matmul,
            max_tensor=gpus[device].max_tensor_bytes,
            n_expert_used=model.experts.n_used if model.experts else 0,
        )

    def put(info: TensorInfo, device: int, matmul: bool) -> None:
        out.tensor_device.setdefault(info.name, device)
        if device == HOST_INDEX:
            if matmul and can_repack and extra_buffer(info):
                out.repacked.add(info.name)
            else:
                host_default.append(info)
            return
        if not supported_on(device, info.name, info, matmul):
            # the GPU cannot run the op that reads it: the next buffer type of its list, the host's
            # (llama-model-loader.cpp, select_weight_buft); a tied output's copy is the embedding itself there
            if info not in host_default:
                host_default.append(info)
            out.tensor_device[info.name] = HOST_INDEX
            return
        rules = gpu_rules[device]
        size = rules.alloc_size(info.type, info.n_bytes, info.shape[0] if info.shape else 1)
        out.gpu[device] = out.gpu.get(device, 0) + rules.padded(size)

    for info in model.input_tensors:
        put(info, HOST_INDEX, matmul=False)
    for layer in model.layers:
        if layer.is_mtp:  # TENSOR_SKIP: multi-token-prediction weights are not loaded, but for some families'
            for info in layer.tensors if model.mtp_loaded else []:
                if info.name.split(".", 2)[-1].startswith(model.mtp_loaded):
                    matmul = _is_matmul_weight(info) and ".embed_tokens." not in info.name  # GGML_OP_GET_ROWS
                    put(info, placement.layers[layer.index], matmul)
            continue
        device = placement.layers[layer.index]
        keep_experts_on_host = layer.index < r.config.n_cpu_moe
        for info in layer.tensors:
            if keep_experts_on_host and _EXPERT_RE.search(info.name):
                # llama.cpp's --n-cpu-moe: a tensor override to the CPU buffer types
                put(info, HOST_INDEX, True)
            else:
                put(info, device, _is_matmul_weight(info))
    # tensors outside blk.N that belong to the repeating layers (rope frequency tables)
    layer_devices = sorted(set(placement.layers))
    rope_devices = layer_devices
    if model.rope_freqs_layers is not None:
        rope_devices = sorted({placement.layers[il] for il in model.rope_freqs_layers})
    for info in model.other_tensors:
        devices = rope_devices if info.name.startswith("rope_freqs.") else layer_devices
        for device in devices or [HOST_INDEX]:
            put(info, device, matmul=False)
    for info in model.output_tensors:
        put(info, placement.output, _is_matmul_weight(info))
    if model.tied_output and not model.output_is_token_embd:
        embd = model.tensor("token_embd.weight")
        if embd is not None:
            if placement.output == HOST_INDEX:
                # the duplicate (the output matmul's copy) shares the mapped range, unless it is
                # repacked; to AMX it is a matmul weight like any other
                output_copy = TensorInfo("output.weight", embd.shape, embd.type, embd.offset, embd.n_bytes, embd.shard)
                if can_repack and extra_buffer(output_copy):
                    pass
                elif not use_mmap:
                    host_default.append(embd)
            else:
                if supported_on(placement.output, "output.weight", embd, matmul=True):
                    rules = gpu_rules[placement.output]
                    size = rules.alloc_size(embd.type, embd.n_bytes, embd.shape[0] if embd.shape else 1)
                    out.gpu[placement.output] = out.gpu.get(placement.output, 0) + rules.padded(size)
                    out.output_copy = placement.output
                elif not use_mmap and embd not in host_default:
                    host_default.append(embd)

    if host_default:
        if use_mmap:
            by_shard: dict[int, list[TensorInfo]] = {}
            for info in host_default:
                by_shard.setdefault(info.shard, []).append(info)
            for shard, infos in sorted(by_shard.items()):
                first = min(i.offset for i in infos)
                last = max(i.offset + i.n_bytes for i in infos)
                name = "CPU_Mapped" if len(by_shard) == 1 else f"CPU_Mapped[{shard}]"
                out.host[name] = last - first
                out.host_mapped += last - first
        else:
            out.host["CPU"] = sum(CPU.padded(i.n_bytes) for i in host_default)
    if amx_total:
        out.host["AMX"] = amx_total
    if repack_bytes:
        out.host["CPU_REPACK"] = repack_bytes
    return out
