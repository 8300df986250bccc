"""The mismatch users trip on: a GPU the driver sees that llama.cpp cannot use.

llama-cpp-python builds for the CPU unless told otherwise, so a machine with an
NVIDIA or AMD GPU (or an Apple silicon Mac) can end up running every layer on
the CPU without a word. Each mismatch carries the exact command that rebuilds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BACKEND_NAMES = {"cuda": "CUDA", "rocm": "ROCm/HIP", "metal": "Metal", "vulkan": "Vulkan"}


def mismatch_message(gpu_name: str, backend: str) -> str:
    from app.native import reinstall_command  # ctypes and the library lookup: not for reading a report

    return (
        f"{gpu_name} is present, but this llama-cpp-python was built without {BACKEND_NAMES[backend]} "
        f"support, so every layer would run on the CPU. Rebuild it with:\n  {reinstall_command(backend)}"
    )


@dataclass(frozen=True)
class Mismatch:
    """A GPU that `seen_by` (NVML, ROCm (pyrsmi), macOS) reports and llama.cpp cannot use."""

    gpu: str
    seen_by: str
    backend: str  # the build that would use it: cuda, rocm, metal

    @property
    def command(self) -> str:
        from app.native import reinstall_command

        return reinstall_command(self.backend)

    @property
    def message(self) -> str:
        return mismatch_message(self.gpu, self.backend)

    @property
    def short(self) -> str:
        """One line for the model picker."""
        return f"{self.gpu} unused: llama-cpp-python has no {BACKEND_NAMES[self.backend]} support"

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "seen_by": self.seen_by,
            "backend": self.backend,
            "command": self.command,
            "message": self.message,
        }


def find_mismatches(
    llama_backends: Sequence[str] | None, nvidia: Sequence[str], amd: Sequence[str], apple_silicon: bool
) -> list[Mismatch]:
    """GPUs a vendor probe sees that no llama.cpp device can drive.

    llama_backends: the backends of llama.cpp's GPU devices (None when llama.cpp could not be
    asked: then nothing can be claimed). nvidia / amd: GPU names from NVML / pyrsmi. A Vulkan
    build drives any vendor's GPU, so it is not a mismatch.
    """
    if llama_backends is None:
        return []
    have = set(llama_backends)
    out = []
    if nvidia and not have & {"cuda", "vulkan"}:
        out.append(Mismatch(_describe(nvidia), "NVML", "cuda"))
    if amd and not have & {"rocm", "vulkan"}:
        out.append(Mismatch(_describe(amd), "ROCm (pyrsmi)", "rocm"))
    if apple_silicon and "metal" not in have:
        out.append(Mismatch("This Mac's GPU", "macOS", "metal"))
    return out


def _describe(names: Sequence[str]) -> str:
    first = names[0]
    return first if len(names) == 1 else f"{first} (and {len(names) - 1} more)"
