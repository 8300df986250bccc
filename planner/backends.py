"""Buffer rules of the ggml backends: alignment and per-tensor allocation size.

Weights, KV cache and compute buffers are allocated tensor by tensor; each
backend pads a tensor to its alignment and some add room of their own (CUDA
pads the last row of quantized matrices to 512 elements).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from planner.ggml_types import GGMLType

if TYPE_CHECKING:
    from planner.hardware import Device

CUDA_MATRIX_ROW_PADDING = 512


@dataclass(frozen=True)
class BackendRules:
    """How one backend lays out buffers: alignment, padded quantized rows, and whether checked on real hardware."""

    name: str  # cpu, cuda, rocm, metal, vulkan
    alignment: int
    pads_quantized_rows: bool = False
    # whether the planner's figures for this backend were checked against a real build
    verified: bool = False

    def alloc_size(self, type_: GGMLType, nbytes: int, ne0: int) -> int:
        """ggml_backend_buft_get_alloc_size for a tensor of `nbytes` with rows of `ne0` elements."""
        if self.pads_quantized_rows and type_.is_quantized and ne0 % CUDA_MATRIX_ROW_PADDING:
            nbytes += type_.row_bytes(CUDA_MATRIX_ROW_PADDING - ne0 % CUDA_MATRIX_ROW_PADDING)
        return nbytes

    def padded(self, size: int) -> int:
        return (size + self.alignment - 1) // self.alignment * self.alignment


CPU = BackendRules("cpu", 32, verified=True)
CUDA = BackendRules("cuda", 128, pads_quantized_rows=True, verified=True)  # bench/gpu: H100 record
ROCM = BackendRules("rocm", 128, pads_quantized_rows=True)
METAL = BackendRules("metal", 32)
VULKAN = BackendRules("vulkan", 256, verified=True)  # tests/vulkan, on lavapipe; alignment: the device's
# a device another machine lends through llama.cpp's RPC backend: the server answers alignment and
# allocation sizes with its own backend's; these are a CPU server's (checked: tests/planner/test_rpc.py)
RPC = BackendRules("rpc", 32, verified=True)

BACKENDS: dict[str, BackendRules] = {b.name: b for b in (CPU, CUDA, ROCM, METAL, VULKAN, RPC)}


def backend_rules(name: str) -> BackendRules:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})") from None


def device_rules(device: Device) -> BackendRules:
    """The backend's rules with the alignment the device's own buffer type reports, where it was read
    (ggml_backend_buft_get_alignment: Vulkan's is the device's minStorageBufferOffsetAlignment)."""
    rules = backend_rules(device.backend)
    if device.buffer_alignment and device.buffer_alignment != rules.alignment:
        return replace(rules, alignment=device.buffer_alignment)
    return rules


# the pinned host buffer type each backend offers beside its device (ggml_backend_dev_host_buffer_type);
# what a device probe read stands first (Device.host_buffer). RPC and Metal offer none.
_HOST_BUFFERS = {"cuda": "CUDA_Host", "rocm": "ROCm_Host", "vulkan": "Vulkan_Host"}


def host_buffer_name(device: Device | None) -> str:
    """The buffer type llama.cpp's host-side buffers take beside `device` ('CPU' where it has none)."""
    if device is None:
        return "CPU"
    if device.host_buffer is not None:
        return device.host_buffer or "CPU"
    return _HOST_BUFFERS.get(device.backend, "CPU")


def host_buffer_extra(name: str) -> int:
    """Bytes a host buffer type adds to each buffer it allocates: Vulkan_Host asks for 32 more "to behave
    like the CPU buffer type" (ggml-vulkan.cpp, ggml_backend_vk_host_buffer_type_alloc_buffer)."""
    return 32 if name.startswith("Vulkan") and name.endswith("_Host") else 0


def host_alignment(device: Device | None) -> int:
    """The alignment of that host buffer type (Vulkan_Host: minMemoryMapAlignment; the others: the CPU's)."""
    if device is None or host_buffer_name(device) == "CPU":
        return CPU.alignment
    return device.host_alignment or CPU.alignment
