"""AMD detail through pyrsmi: VRAM and GTT used and total per GPU."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass


@dataclass(frozen=True)
class RocmGpu:
    index: int
    name: str
    vram_total: int
    vram_used: int
    gtt_total: int
    gtt_used: int

    @property
    def vram_free(self) -> int:
        return max(self.vram_total - self.vram_used, 0)


def list_gpus() -> list[RocmGpu]:
    """All AMD GPUs the ROCm SMI library reports. Raises RuntimeError with the reason when unusable."""
    try:
        from pyrsmi import rocml
    except ImportError:
        raise RuntimeError("pyrsmi is not installed") from None
    try:
        rocml.smi_initialize()
    except Exception as exc:
        name = type(exc).__name__
        if "LibraryNotFound" in name:
            raise RuntimeError("no ROCm SMI library (ROCm is not installed)") from None
        raise RuntimeError(str(exc) or name) from None
    try:  # pragma: no cover - needs an AMD GPU
        out = []
        for i in range(rocml.smi_get_device_count()):
            def mem(kind: str, fn, i: int = i) -> int:
                try:
                    return int(fn(i, kind))
                except Exception:
                    return 0
            total, used = rocml.smi_get_device_memory_total, rocml.smi_get_device_memory_used
            out.append(RocmGpu(i, str(rocml.smi_get_device_name(i)), mem("VRAM", total), mem("VRAM", used),
                               mem("GTT", total), mem("GTT", used)))
        return out
    except Exception as exc:  # pragma: no cover
        raise RuntimeError(str(exc) or type(exc).__name__) from None
    finally:
        with contextlib.suppress(Exception):
            rocml.smi_shutdown()
