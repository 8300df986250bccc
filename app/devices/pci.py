"""PCI bus ids, the one name a GPU has in every API (llama.cpp, NVML, ROCm SMI).

Device order differs between APIs (CUDA orders by speed unless
CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML by bus), so vendor detail is matched to
llama.cpp's devices by bus id, and by order only when a bus id is missing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

_BUS_ID = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
    r"\.(?P<fn>[0-7])"
)


def normalize(text: str | bytes | None) -> str | None:
    """'00000000:01:00.0' (NVML), '0000:01:00.0' (CUDA), '01:00.0' -> '0000:01:00.0'; None if unreadable."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    match = _BUS_ID.match(text.strip())
    if not match:
        return None
    domain = int(match["domain"] or "0", 16)
    return f"{domain:04x}:{int(match['bus'], 16):02x}:{int(match['dev'], 16):02x}.{match['fn']}"


def from_bdf(bdf: int) -> str | None:
    """ROCm SMI's 64-bit BDF (domain << 32 | bus << 8 | device << 3 | function) as a bus id."""
    if bdf is None or bdf < 0:
        return None
    domain, bus, dev, fn = (bdf >> 32) & 0xFFFFFFFF, (bdf >> 8) & 0xFF, (bdf >> 3) & 0x1F, bdf & 0x7
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"


class _LlamaDevice(Protocol):
    """A device as llama.cpp lists it (app.devices.ggml.GGMLDevice)."""

    @property
    def name(self) -> str: ...
    @property
    def device_id(self) -> str | None: ...
    @property
    def is_gpu(self) -> bool: ...
    @property
    def backend(self) -> str: ...


class _VendorGpu(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def pci_bus_id(self) -> str | None: ...


V = TypeVar("V", bound=_VendorGpu)


def match(devices: Sequence[_LlamaDevice], vendor: Sequence[V], backend: str) -> dict[str, V]:
    """llama.cpp device name -> the vendor probe's GPU: by PCI bus id, else in order among the
    devices of `backend` that have no id (CUDA_VISIBLE_DEVICES and speed ordering make the
    order unreliable, hence the ids first)."""
    out: dict[str, V] = {}
    by_id = {g.pci_bus_id: g for g in vendor if g.pci_bus_id}
    used: set[int] = set()
    for d in devices:
        bus = normalize(d.device_id)
        if bus and bus in by_id:
            out[d.name] = by_id[bus]
            used.add(by_id[bus].index)
    rest = [g for g in vendor if g.index not in used]
    unmatched = [d for d in devices if d.is_gpu and d.backend == backend and d.name not in out and not d.device_id]
    for d, g in zip(unmatched, rest):
        out[d.name] = g
    return out
