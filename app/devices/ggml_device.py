"""A device as llama.cpp's own device API reports it: plain data, shared by the probe (app.devices.ggml)
and what enriches it (app.devices.identity)."""

from __future__ import annotations

from dataclasses import dataclass

DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}
GPU_TYPES = ("gpu", "igpu")

# llama.cpp's device names start with the backend's name (GGML_CUDA_NAME is "ROCm" in a HIP build)
_NAME_PREFIXES = (
    ("cuda", "cuda"),
    ("rocm", "rocm"),
    ("hip", "rocm"),
    ("mtl", "metal"),
    ("metal", "metal"),
    ("vulkan", "vulkan"),
    ("sycl", "sycl"),
    ("opencl", "opencl"),
    ("musa", "musa"),
    ("cann", "cann"),
    ("webgpu", "webgpu"),
    ("rpc", "rpc"),
)


@dataclass(frozen=True)
class GGMLDevice:
    """A device as llama.cpp's own device API reports it."""

    name: str  # CUDA0, ROCm0, MTL0, Vulkan0, CPU
    description: str
    type: str  # cpu, gpu, igpu, accel, meta
    free: int
    total: int
    # the lower-case PCI bus id ("0000:c1:00.0") when the backend reports one
    device_id: str | None = None
    # the GPU's identity (app.devices.identity), where the driver API or sysfs tells it
    sm_count: int | None = None
    threads_per_sm: int | None = None
    compute_capability: str | None = None
    driver: str = ""
    card: str = ""
    # what its buffers allow, asked of ggml (app.devices.buffer_limits); None/'' where not read
    buffer_alignment: int | None = None
    buffer_max_size: int | None = None
    host_buffer: str = ""  # the pinned host buffer type llama.cpp uses beside it (CUDA_Host, Vulkan_Host)
    host_alignment: int | None = None
    max_tensor_bytes: int | None = None  # the largest tensor an op on it may touch; None: no limit

    @property
    def backend(self) -> str:
        lowered = self.name.lower()
        for prefix, backend in _NAME_PREFIXES:
            if lowered.startswith(prefix):
                return backend
        return "cpu" if self.type == "cpu" else "unknown"

    @property
    def is_gpu(self) -> bool:
        return self.type in GPU_TYPES

    @property
    def used(self) -> int:
        return max(self.total - self.free, 0)
