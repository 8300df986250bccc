"""Buffer rules of the ggml backends: alignment and per-tensor allocation size.

Weights, KV cache and compute buffers are allocated tensor by tensor; each
backend pads a tensor to its alignment and some add room of their own (CUDA
pads the last row of quantized matrices to 512 elements).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.ggml_types import GGMLType

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
VULKAN = BackendRules("vulkan", 256)
# a device another machine lends through llama.cpp's RPC backend: the server answers alignment and
# allocation sizes with its own backend's; these are a CPU server's (checked: tests/planner/test_rpc.py)
RPC = BackendRules("rpc", 32, verified=True)

BACKENDS: dict[str, BackendRules] = {b.name: b for b in (CPU, CUDA, ROCM, METAL, VULKAN, RPC)}


def backend_rules(name: str) -> BackendRules:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})") from None
