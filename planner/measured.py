"""A plan corrected by llama.cpp's own figures (its no_alloc dry run), and the gap between the two.

The planner derives every buffer from the header; llama.cpp's dry run computes the
KV caches, recurrent state, output and compute buffers with the real backend code
on the real devices. Where the two differ, llama.cpp's figure wins (for an exact rule, only
when it is the larger: `to_take`): `corrected`
returns the plan with those buffers replaced (and its estimates about them dropped),
and `extra_per_device` says how much more each device needs than planned, which the
solver subtracts from that device's memory before planning again.

Figures come keyed by (kind, device) in the planner's vocabulary: kind is kv, kv_swa,
rs, output or compute; device is a GPU's name or CPU. A key may name several devices
joined by "+" when llama.cpp reports one total for a cache that spans them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from planner.memory import Buffer, DeviceUsage, MemoryPlan

KINDS = ("kv", "kv_swa", "recurrent", "output", "compute")
# estimate notes about what a dry run measures
_COVERED = ("compute", "KV", "no exact rules", "not been checked")
_USAGE_FIELD = {"kv": "kv", "kv_swa": "kv", "recurrent": "recurrent", "output": "output", "compute": "compute"}


@dataclass(frozen=True)
class Gap:
    """One buffer kind on one device (or a cache spanning several): planned beside llama.cpp's figure."""

    kind: str
    devices: tuple[str, ...]
    planned: int
    measured: int
    tolerance: int

    @property
    def delta(self) -> int:
        return self.measured - self.planned

    @property
    def matches(self) -> bool:
        return abs(self.delta) <= self.tolerance


def planned_by(plan: MemoryPlan) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for b in plan.buffers:
        if b.kind in KINDS:
            out[(b.kind, b.device)] = out.get((b.kind, b.device), 0) + b.bytes
    return out


def gaps(plan: MemoryPlan, measured: dict[tuple[str, str], int], tolerance_per_figure: int) -> list[Gap]:
    """Every figure llama.cpp gave, beside the plan's bytes for the same kind and devices."""
    planned = planned_by(plan)
    rows = []
    for (kind, where), size in sorted(measured.items()):
        devices = tuple(where.split("+"))
        mine = sum(planned.get((kind, d), 0) for d in devices)
        rows.append(Gap(kind, devices, mine, size, tolerance_per_figure))
    return rows


def to_take(plan: MemoryPlan, found: list[Gap]) -> list[Gap]:
    """The figures of llama.cpp's that the plan takes: all of them for an estimate, only those above
    the plan's for an exact architecture. Where the dry run counts less than an exact rule, the
    allocation has always matched the rule (minimax-01's compute with several sequences: the dry run
    said 7.9 MB, the load allocated the 16.3 MB planned), and a figure too small is the one mistake a
    plan must not make."""
    if not plan.model.exact:
        return found
    return [g for g in found if g.matches or g.delta > 0]


def extra_per_device(found: list[Gap]) -> dict[str, int]:
    """Bytes each device needs beyond the plan (a shortfall spread over a cache's devices evenly)."""
    extra: dict[str, int] = {}
    for gap in found:
        if gap.matches:
            continue
        share = gap.delta // len(gap.devices)
        for d in gap.devices:
            extra[d] = extra.get(d, 0) + share
    return extra


def corrected(plan: MemoryPlan, found: list[Gap]) -> MemoryPlan:
    """The plan with llama.cpp's figures in place of its own where they differ (a total over several
    devices is split as the plan split it). For an architecture without exact rules every figure
    llama.cpp gave replaces the estimate, also where the two happen to agree."""
    fixed = copy.copy(plan)
    fixed.gpus = [copy.copy(u) for u in plan.gpus]
    fixed.host = copy.copy(plan.host)
    fixed.buffers = [copy.copy(b) for b in plan.buffers]
    usages: dict[str, DeviceUsage] = {u.name: u for u in fixed.gpus}
    usages["CPU"] = fixed.host
    for gap in found:
        if gap.matches and (plan.model.exact or gap.delta == 0):
            continue
        buffers = [b for b in fixed.buffers if b.kind == gap.kind and b.device in gap.devices]
        if not buffers:
            device = gap.devices[0]
            buffers = [Buffer(device, gap.kind, device, 0)]
            fixed.buffers.append(buffers[0])
        remaining = gap.measured
        for i, b in enumerate(buffers):
            new = remaining if i == len(buffers) - 1 else round(gap.measured * b.bytes / max(gap.planned, 1))
            remaining -= new
            usage = usages[b.device]
            field = _USAGE_FIELD[gap.kind]
            setattr(usage, field, getattr(usage, field) + new - b.bytes)
            b.bytes = new
    # what the dry run covered is no longer an estimate: KV, recurrent state, output and compute
    fixed.estimates = [e for e in plan.estimates if not any(word in e for word in _COVERED)]
    return fixed
