"""llama.cpp's Vulkan backend as the tests meet it: the devices the app's probe finds, and planned against
allocated bytes for loads on them (Mesa's lavapipe where no GPU is at hand: `bash .ci/vulkan-tier`)."""

from __future__ import annotations

import os
from typing import Any

from planner.hardware import Device
from tests.support.compare import ConfigRow, compare_devices


def vulkan_build() -> bool:
    """Whether the llama-cpp-python in use ships ggml's Vulkan backend."""
    from app.devices.ggml import gpu_backend_libraries

    return "ggml-vulkan" in gpu_backend_libraries()


def vulkan_devices() -> list[Device]:
    """The Vulkan devices the app's own probe reports, as the planner sees them."""
    from app.devices import probe_devices

    return [d for d in probe_devices().gpus if d.backend == "vulkan"]


def with_ops(path: str | os.PathLike[str], devices: list[Device]) -> list[Device]:
    """The devices with what each answered for the model's ops, as the app plans (app.devices.op_table)."""
    from app.devices.op_table import with_op_support
    from planner.anatomy import load_anatomy
    from planner.gguf import read_gguf

    return with_op_support(load_anatomy(read_gguf(path)), devices)


def device_of_buffer(name: str) -> str:
    """Vulkan0 ... hold device buffers; Vulkan_Host (pinned), CPU, CPU_Mapped and the CPU's extra types are host."""
    return name if name.startswith("Vulkan") and not name.endswith("_Host") else "CPU"


def compare_vulkan(path: str | os.PathLike[str], configs: list[dict[str, Any]], n_gpu_layers: int) -> list[ConfigRow]:
    """One row per configuration of a load with `n_gpu_layers` on the first Vulkan device."""
    devices = with_ops(path, vulkan_devices()[:1])
    return compare_devices(path, configs, devices, device_of_buffer, n_gpu_layers, note={"device": devices[0].name})
