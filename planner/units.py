"""Small shared rules of arithmetic and naming, each in one place."""

from __future__ import annotations

import re


def round_up(n: int, to: int) -> int:
    """n rounded up to a multiple of `to` (GGML_PAD)."""
    return (n + to - 1) // to * to


# the name the host's buffers go under in a plan (the CPU backend)
HOST_BUFFER = "CPU"

# the names llama.cpp gives its GPU devices, by backend (GGML_CUDA_NAME, GGML_METAL_NAME ...; a HIP
# build of ggml-cuda calls its devices ROCm0, ROCm1 ...)
DEVICE_PREFIX = {"cuda": "CUDA", "rocm": "ROCm", "metal": "MTL", "vulkan": "Vulkan"}

# llama.cpp's split files: llama_split_path's "%s-%05d-of-%05d.gguf"
SPLIT_NAME = re.compile(r"^(?P<stem>.+)-(?P<idx>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)

# the routed experts' matrices of a layer (what llama.cpp's --n-cpu-moe overrides to the CPU)
EXPERT_TENSOR = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"


def expert_tensor_pattern(layer: int) -> str:
    """The tensor-override pattern for one layer's experts (llama_model_params.tensor_buft_overrides)."""
    return rf"blk\.{layer}{EXPERT_TENSOR}"


def format_size(n: int | float) -> str:
    """Bytes as a short human figure: 1.23 GiB, 456.0 MiB, 12 KiB."""
    gib, mib = 1024**3, 1024**2
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n >= gib:
        return f"{sign}{n / gib:.2f} GiB"
    if n >= mib:
        return f"{sign}{n / mib:.1f} MiB"
    if n >= 1024:
        return f"{sign}{n / 1024:.0f} KiB"
    return f"{sign}{int(n)} B"
