"""The memory map of one device: what fills it, to scale, from the plan and the live reading.

The plan says what this process puts on the device (weights, KV cache, compute ...) at the context
held now and at the maximum the context may grow to; the live reading says how much of the device
is in use. The difference between that and ours is other programs'; between the two plans, the
room reserved for the context's growth; the plan's margin stays free. Each part is a `Segment`
with a name and a sentence that explains it in a user's words (the dashboard's legend, tooltips
and help say the same).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.memory_words import COMMITTED, IN_USE, MEANING, OTHER_PROGRAMS, RESERVED
from planner.kv import KVLayout
from planner.memory import DeviceUsage, MemoryPlan

# key -> (label, what it is, in a user's words)
WORDS: dict[str, tuple[str, str]] = {
    "weights": ("weights", "the model's parameters, loaded once"),
    "mapped": (
        "mapped weights",
        "the model file mapped into memory: the system keeps it in its file cache (not counted as used) "
        "and may read it again from disk",
    ),
    "kv_in_use": (
        f"KV {IN_USE}",
        "the attention cache holding this conversation's tokens (sliding-window layers' too)",
    ),
    "kv_empty": (
        "KV empty",
        f"the rest of the KV cache {COMMITTED} for the context held now, not filled yet: the conversation grows "
        "into it (in use and empty together are the committed cache)",
    ),
    "swa": (
        "SWA cache",
        "the sliding-window layers' KV cache, allocated whole and not in use yet: they look back a fixed "
        "window, so it stops growing there",
    ),
    "recurrent": ("recurrent state", "the fixed-size state of the model's recurrent layers"),
    "output": ("output", "the logits buffer: one score per vocabulary token"),
    "compute": (
        "compute arena",
        "scratch memory llama.cpp reuses for each step's intermediate results (its compute buffer)",
    ),
    "projector": ("projector", "the image encoder (mmproj): its weights and its compute buffer"),
    "overhead": ("runtime", "the GPU runtime's own memory: driver context and library workspaces, not a buffer"),
    "others": (OTHER_PROGRAMS, "memory other programs (and the system) hold on this device now"),
    "reserved": (f"KV {RESERVED}", MEANING[RESERVED] + " to its maximum"),
    "free": ("free", "free beyond everything the plan needs"),
    "margin": ("margin", "kept free as a safety margin for other programs"),
}

# the order the parts are drawn in, left to right: ours, then others', then the room kept free
ORDER = (
    "weights",
    "mapped",
    "kv_in_use",
    "kv_empty",
    "swa",
    "recurrent",
    "output",
    "compute",
    "projector",
    "overhead",
    "others",
    "reserved",
    "margin",
    "free",
)


@dataclass(frozen=True)
class Segment:
    key: str
    bytes: int

    @property
    def label(self) -> str:
        return WORDS[self.key][0]

    @property
    def explanation(self) -> str:
        return WORDS[self.key][1]


@dataclass(frozen=True)
class DeviceMap:
    name: str
    total: int
    segments: list[Segment]
    short: int = 0  # bytes of the reserved room and margin that other programs have taken meanwhile

    def get(self, key: str) -> int:
        return next((s.bytes for s in self.segments if s.key == key), 0)


def _on(plan: MemoryPlan, device: str, kind: str) -> int:
    return sum(b.bytes for b in plan.buffers if b.device == device and b.kind == kind)


def kv_in_use(layout: KVLayout, cells: int, swa: bool = False) -> int:
    """Bytes of the full-attention KV cache (`swa`: of the sliding-window one, which stops at its
    window) the conversation's `cells` fill."""
    return layout.bytes_per_cell(swa=swa) * min(max(cells, 0), layout.cells_swa if swa else layout.cells)


def device_map(plan: MemoryPlan, now: MemoryPlan, name: str, reading: tuple[int, int] | None, cells: int) -> DeviceMap:
    """The parts of device `name` (a GPU's name, or CPU for host RAM): `plan` is the plan at its
    maximum context, `now` at the context held now, `reading` the device's (used, total) bytes as
    measured now (None: as the plan found it), `cells` the KV cells the conversation fills."""
    full = _usage(plan, name)
    current = _usage(now, name)
    kv_full, kv_swa = _on(now, name, "kv"), _on(now, name, "kv_swa")
    in_use = _share(kv_in_use(now.kv, cells), kv_full, now, "kv")
    swa_in_use = _share(kv_in_use(now.kv, cells, swa=True), kv_swa, now, "kv_swa")
    projector = _on(now, name, "projector_weights") + _on(now, name, "projector_compute")
    mapped = current.weights_mapped
    resident = current.planned - mapped
    if reading is None:
        used, total = current.total - current.free + resident, current.total
    else:
        used, total = reading
    parts = {
        "weights": current.weights - _on(now, name, "projector_weights"),
        "mapped": mapped,
        "kv_in_use": in_use + swa_in_use,
        "kv_empty": kv_full - in_use,
        "swa": kv_swa - swa_in_use,
        "recurrent": current.recurrent,
        "output": current.output,
        "compute": current.compute - _on(now, name, "projector_compute"),
        "projector": projector,
        "overhead": current.overhead,
        "others": max(used - resident, 0),
    }
    free_now = max(total - max(used, resident) - mapped, 0)
    reserved = max(full.planned - current.planned, 0)
    margin = full.margin
    short = max(reserved + margin - free_now, 0)
    parts["reserved"] = min(reserved, free_now)
    parts["margin"] = min(margin, free_now - parts["reserved"])
    parts["free"] = free_now - parts["reserved"] - parts["margin"]
    segments = [Segment(key, parts[key]) for key in ORDER if parts.get(key, 0) > 0]
    return DeviceMap(name, total, segments, short)


def _share(in_use: int, here: int, plan: MemoryPlan, kind: str) -> int:
    """The part of the cache's bytes in use that lies on this device (its share of the cache)."""
    everywhere = sum(b.bytes for b in plan.buffers if b.kind == kind)
    return min(here, round(in_use * here / everywhere)) if everywhere else 0


def device_maps(plan: MemoryPlan, now: MemoryPlan, readings: dict[str, tuple[int, int]], cells: int) -> list[DeviceMap]:
    """A map per device the model uses (its GPUs that hold anything, then host RAM)."""
    names = [d.name for d in now.gpus if d.planned] + [now.host.name]
    return [device_map(plan, now, name, readings.get(name), cells) for name in names]


def _usage(plan: MemoryPlan, name: str) -> DeviceUsage:
    return next(d for d in [*plan.gpus, plan.host] if d.name == name)


def cell_widths(sizes: list[int], total: int, width: int) -> list[int]:
    """Cells for each part of a bar `width` cells wide that stands for `total` bytes: to scale
    (largest remainders), except that every part above zero gets at least one cell while there
    are cells to spare, so that a small buffer is still seen (its size is in the legend)."""
    if width <= 0 or total <= 0:
        return [0] * len(sizes)
    exact = [max(s, 0) * width / total for s in sizes]
    cells = [int(e) for e in exact]
    for i in sorted(range(len(sizes)), key=lambda i: exact[i] - cells[i], reverse=True):
        if sum(cells) >= width:
            break
        if exact[i] > cells[i]:
            cells[i] += 1
    for i, s in enumerate(sizes):  # a cell for the small ones, taken from the largest
        if s > 0 and cells[i] == 0:
            largest = max(range(len(cells)), key=lambda j: cells[j])
            if cells[largest] > 1:
                cells[largest] -= 1
                cells[i] = 1
    return cells
