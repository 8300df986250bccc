"""AMD detail through pyrsmi: VRAM and GTT used and total per GPU.

pyrsmi reports its own failures through the root logger and, when the ROCm
library is present but the amdgpu driver is not, through a shell pipeline
writing to stderr; neither may reach the terminal of a TUI, so the driver is
checked here first and pyrsmi's logging is muted while it runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.devices import pci

_AMDGPU_MODULE = "/sys/module/amdgpu"


@dataclass(frozen=True)
class RocmGpu:
    """An AMD GPU as pyrsmi reports it: VRAM and GTT."""

    index: int
    name: str
    vram_total: int
    vram_used: int
    gtt_total: int
    gtt_used: int
    pci_bus_id: str | None = None

    @property
    def vram_free(self) -> int:
        return max(self.vram_total - self.vram_used, 0)


@contextlib.contextmanager
def _quiet_logging() -> Iterator[None]:
    """Keep pyrsmi's logging.error() calls from configuring a stderr handler on the root logger."""
    import logging  # only where pyrsmi runs: the import costs a plan's start 5 ms

    root = logging.getLogger()
    added = None
    if not root.handlers:
        added = logging.NullHandler()
        root.addHandler(added)
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)
        if added is not None:
            root.removeHandler(added)


def _driver_loaded() -> bool:
    return not sys.platform.startswith("linux") or os.path.isdir(_AMDGPU_MODULE)


def _size(fn: Any, index: int, kind: str) -> int:
    """pyrsmi answers -1 (or raises) for what it cannot read: count it as 0."""
    try:
        value = int(fn(index, kind))
    except Exception:
        return 0
    return max(value, 0)


def _read(rocml: Any) -> list[RocmGpu]:
    out = []
    for i in range(rocml.smi_get_device_count()):
        total, used = rocml.smi_get_device_memory_total, rocml.smi_get_device_memory_used
        bus_id = None
        with contextlib.suppress(Exception):
            bus_id = pci.from_bdf(int(rocml.smi_get_device_pci_id(i)))
        try:
            name = str(rocml.smi_get_device_name(i))
        except Exception:
            name = f"AMD GPU {i}"
        out.append(
            RocmGpu(
                i,
                name,
                _size(total, i, "VRAM"),
                _size(used, i, "VRAM"),
                _size(total, i, "GTT"),
                _size(used, i, "GTT"),
                bus_id,
            )
        )
    return out


def list_gpus() -> list[RocmGpu]:
    """All AMD GPUs the ROCm SMI library reports. Raises RuntimeError with the reason when unusable."""
    if not _driver_loaded():  # before the import: pyrsmi is slow to import, and useless without it
        raise RuntimeError("no AMD GPU driver (amdgpu is not loaded)")
    try:
        from pyrsmi import rocml
    except ImportError:
        raise RuntimeError("pyrsmi is not installed") from None
    with _quiet_logging():
        try:
            rocml.smi_initialize()
        except Exception as exc:
            name = type(exc).__name__
            if "LibraryNotFound" in name:
                raise RuntimeError("no ROCm SMI library (ROCm is not installed)") from None
            raise RuntimeError(f"ROCm SMI error: {exc or name}") from None
        try:
            return _read(rocml)
        except Exception as exc:
            raise RuntimeError(f"ROCm SMI error: {exc or type(exc).__name__}") from None
        finally:
            with contextlib.suppress(Exception):
                rocml.smi_shutdown()
