"""What-if devices: `--vram 8GiB,4GiB` and the VRAMCHAT_DEVICES environment variable.

VRAMCHAT_DEVICES makes the whole app (TUI included) believe in given devices,
so that tests and screenshots are reproducible. Its value is a comma-separated
list of items:

    24GiB            a GPU with 24 GiB, all of it free
    24GiB/6GiB       a GPU with 24 GiB of which other processes hold 6 GiB
    24               a bare number is GiB (24 is 24GiB; 24B is 24 bytes)
    ram=64GiB        host RAM (total; `ram=64GiB/16GiB` holds 16 GiB used)
    backend=cuda     the GPUs' backend: cuda (default), rocm, metal, vulkan
                     (a metal GPU shares host RAM: one pool, counted once)
    bw=1008GB/s      the GPUs' memory bandwidth (also bandwidth=), for the speed prediction;
                     one value for every GPU, or one bw= item per GPU in order. Without it a
                     simulated GPU has no speed figure (nothing is made up)
    none             no GPU at all (a CPU-only machine)

Example: VRAMCHAT_DEVICES="12GiB/2GiB,ram=32GiB,bw=360GB/s"
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.hardware import Device, GiB, format_size, parse_bandwidth, parse_size
from planner.units import DEVICE_PREFIX

ENV_VAR = "VRAMCHAT_DEVICES"
_PREFIX = DEVICE_PREFIX


@dataclass
class SimulatedSpec:
    """Devices given on the command line (--vram, --ram, VRAMCHAT_DEVICES) instead of probed."""

    gpus: list[tuple[int, int]] = field(default_factory=list)  # (total, used by others)
    ram: tuple[int, int] | None = None  # (total, used)
    backend: str = "cuda"
    bandwidths: list[float] = field(default_factory=list)  # bytes/s: one for all GPUs, or one per GPU

    def bandwidth(self, index: int) -> float | None:
        if not self.bandwidths:
            return None
        if len(self.bandwidths) == 1:
            return self.bandwidths[0]
        return self.bandwidths[index] if index < len(self.bandwidths) else None

    def devices(self) -> list[Device]:
        prefix = _PREFIX.get(self.backend, "GPU")
        unified = self.backend == "metal"
        out = []
        for i, (total, used) in enumerate(self.gpus):
            bw = self.bandwidth(i)
            out.append(
                Device(
                    f"{prefix}{i}",
                    "gpu",
                    self.backend,
                    total,
                    max(total - used, 0),
                    unified=unified,
                    description=f"simulated {format_size(total)} GPU",
                    simulated=True,
                    bandwidth=bw,
                    bandwidth_source=f"given for a what-if card ({bw / 1e9:,.0f} GB/s), not measured" if bw else "",
                )
            )
        return out


def device_size(text: str) -> int:
    """A device's memory as a user writes it: with a unit (8GiB, 512MiB, 1.5T), or a bare number, which
    means GiB (`--vram 8` is an 8 GiB card, not 8 bytes)."""
    bare = text.strip().replace(" ", "")
    try:
        gib = float(bare)
    except ValueError:
        return parse_size(text)
    if not gib > 0 or gib == float("inf"):
        raise ValueError(f"{text!r}: a size must be a positive number (of GiB, or with a unit: 8GiB, 512MiB)")
    return int(gib * GiB)


def _total_used(text: str) -> tuple[int, int]:
    if "/" in text:
        total_s, used_s = text.split("/", 1)
        total, used = device_size(total_s), (0 if used_s.strip() in ("0", "") else device_size(used_s))
        if used > total:
            raise ValueError(f"{text!r}: more memory in use than the device has")
        return total, used
    return device_size(text), 0


def parse_devices(text: str) -> SimulatedSpec:
    """Parse a VRAMCHAT_DEVICES / --vram value; raises ValueError with a readable reason."""
    spec = SimulatedSpec()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        if item.lower() == "none":
            continue
        if "=" in item:
            key, value = (s.strip() for s in item.split("=", 1))
            key = key.lower()
            if key == "ram":
                spec.ram = _total_used(value)
            elif key in ("bw", "bandwidth"):
                spec.bandwidths.append(parse_bandwidth(value))
            elif key == "backend":
                if value.lower() not in _PREFIX:
                    raise ValueError(f"unknown backend {value!r} (use cuda, rocm, metal or vulkan)")
                spec.backend = value.lower()
            else:
                raise ValueError(f"unknown setting {key!r} in {text!r} (use ram=, backend= or bw=)")
        else:
            spec.gpus.append(_total_used(item))
    if len(spec.bandwidths) > 1 and len(spec.bandwidths) != len(spec.gpus):
        raise ValueError(f"{len(spec.bandwidths)} bw= items for {len(spec.gpus)} GPUs: give one for all, or one each")
    return spec
