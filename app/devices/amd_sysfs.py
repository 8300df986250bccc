"""AMD GPUs as the amdgpu driver shows them in sysfs: memory in use, gfx target, compute units.

`hipMemGetInfo` (llama.cpp's free memory on ROCm) does not see VRAM that the desktop, Vulkan or
OpenGL hold (a 126-176 MiB gap measured, llama.cpp #24906); the driver's own counters
(`mem_info_vram_used` under /sys/class/drm/cardN/device) do. The KFD topology
(/sys/class/kfd/kfd/topology/nodes/N/properties) names the gfx target, which decides the
matrix-multiply paths ggml-cuda takes in a HIP build (planner.cuda_paths), and the compute units.
Everything is read from files: no driver call, no context. `root` lets tests use a fake tree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from app.devices import pci

AMD_VENDOR = "0x1002"


@dataclass(frozen=True)
class AmdGpu:
    pci_bus_id: str
    vram_total: int
    vram_used: int
    gtt_total: int
    gtt_used: int
    gfx_target: str | None = None  # "gfx1100"
    cu_count: int | None = None
    apu: bool = False  # an integrated GPU: a BIOS carve-out of host RAM, the rest through GTT
    driver: str = ""

    @property
    def vram_free(self) -> int:
        return max(self.vram_total - self.vram_used, 0)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _number(path: Path) -> int:
    text = _read(path)
    try:
        return int(text or "0")
    except ValueError:
        return 0


def gfx_name(version: int) -> str | None:
    """KFD's gfx_target_version (major x 10000 + minor x 100 + stepping) as a target: 110000 -> gfx1100,
    90010 -> gfx90a, 90402 -> gfx942."""
    if version <= 0:
        return None
    major, minor, step = version // 10000, version // 100 % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _kfd_nodes(root: Path) -> dict[str, dict[str, int]]:
    """PCI bus id -> the KFD node's properties, for the GPU nodes."""
    out: dict[str, dict[str, int]] = {}
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    try:
        entries = sorted(nodes.iterdir())
    except OSError:
        return out
    for node in entries:
        text = _read(node / "properties")
        if not text:
            continue
        props: dict[str, int] = {}
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            try:
                props[key] = int(value)
            except ValueError:
                continue
        if props.get("simd_count", 0) <= 0:
            continue  # a CPU node
        location = props.get("location_id", 0)
        bus = pci.normalize(
            f"{props.get('domain', 0):04x}:{(location >> 8) & 0xFF:02x}:{(location >> 3) & 0x1F:02x}.{location & 7}"
        )
        if bus:
            out[bus] = props
    return out


def _driver(root: Path) -> str:
    version = _read(root / "sys/module/amdgpu/version")
    if version:
        return f"amdgpu {version}"
    try:
        return f"kernel {os.uname().release}" if str(root) == "/" else ""
    except AttributeError:  # no os.uname on Windows
        return ""


def _bus_id(device: Path) -> str | None:
    """The card's PCI address: uevent's PCI_SLOT_NAME, else the name the device link points at."""
    for line in (_read(device / "uevent") or "").splitlines():
        if line.startswith("PCI_SLOT_NAME="):
            return pci.normalize(line.split("=", 1)[1])
    return pci.normalize(os.path.basename(os.path.realpath(device)))


def read_gpus(root: str | Path = "/") -> list[AmdGpu]:
    """Every AMD GPU the amdgpu driver lists (an empty list where there is none, or no sysfs)."""
    base = Path(root)
    drm = base / "sys/class/drm"
    try:
        cards = sorted(p for p in drm.iterdir() if p.name.startswith("card") and "-" not in p.name)
    except OSError:
        return []
    kfd = _kfd_nodes(base)
    driver = _driver(base)
    out = []
    for card in cards:
        device = card / "device"
        if _read(device / "vendor") != AMD_VENDOR or _read(device / "mem_info_vram_total") is None:
            continue
        bus = _bus_id(device)
        if bus is None:
            continue
        props = kfd.get(bus, {})
        simd_per_cu = props.get("simd_per_cu", 0)
        vram_total = _number(device / "mem_info_vram_total")
        gtt_total = _number(device / "mem_info_gtt_total")
        out.append(
            AmdGpu(
                bus,
                vram_total,
                _number(device / "mem_info_vram_used"),
                gtt_total,
                _number(device / "mem_info_gtt_used"),
                gfx_name(props.get("gfx_target_version", 0)),
                props["simd_count"] // simd_per_cu if simd_per_cu else None,
                # KFD puts an APU's CPU cores and SIMDs in one node; a carve-out far below GTT says so too
                props.get("cpu_cores_count", 0) > 0 or (0 < vram_total <= 2 * 1024**3 < gtt_total),
                driver,
            )
        )
    return out
