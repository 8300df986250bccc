"""The mismatch users trip on: a GPU the driver sees that llama.cpp cannot use."""

from __future__ import annotations

LLAMA_CPP_VERSION = "0.3.36"

REINSTALL_FLAGS = {
    "cuda": "-DGGML_CUDA=on",
    "rocm": "-DGGML_HIP=on",
    "metal": "-DGGML_METAL=on",
    "vulkan": "-DGGML_VULKAN=on",
}
BACKEND_NAMES = {"cuda": "CUDA", "rocm": "ROCm/HIP", "metal": "Metal", "vulkan": "Vulkan"}


def reinstall_command(backend: str) -> str:
    """The pip command that rebuilds llama-cpp-python for a GPU backend."""
    flags = REINSTALL_FLAGS[backend]
    return (f'CMAKE_ARGS="{flags}" pip install --force-reinstall --no-cache-dir '
            f'llama-cpp-python=={LLAMA_CPP_VERSION}')


def mismatch_message(gpu_name: str, backend: str) -> str:
    return (f"{gpu_name} is present, but this llama-cpp-python was built without {BACKEND_NAMES[backend]} "
            f"support, so every layer would run on the CPU. Rebuild it with:\n  {reinstall_command(backend)}")
