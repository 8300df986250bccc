"""Planned vs actual, buffer by buffer: the one model of that comparison in the app.

`compare` sums per buffer kind and device (what the tests and the retry logic check); `per_buffer`
keeps llama.cpp's buffer names (the dashboard's table). Both use the log's rounding as tolerance.

The planned side is the planner's `MemoryPlan`; the measured side is what
llama.cpp's log reported while the engine loaded the model (`Measurements`),
plus, per device, what the process took as the OS or the driver sees it
(`ProcessMemory` before and after the load).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.devices.buffer_names import device_of
from app.devices.process import ProcessMemory, delta
from app.engine.llama_log import LOG_ROUNDING, Measurements
from planner.hardware import HOST
from planner.memory import Buffer, MemoryPlan
from planner.rpc import rpc_buffer_names

if TYPE_CHECKING:
    from app.engine.types import LoadReport
    from app.engine.verify import Verification

KINDS = ("weights", "kv", "kv_swa", "recurrent", "output", "compute", "projector_weights", "projector_compute")


@dataclass(frozen=True)
class BufferComparison:
    kind: str  # weights, kv, kv_swa, recurrent, output, compute; or "process" (the OS's / driver's view)
    device: str  # a GPU's name (CUDA0, ROCm0, MTL0, Vulkan0) or CPU for host memory
    planned: int
    measured: int | None  # None: nothing was measured for it
    tolerance: int = 0  # how far apart the two may be from the log's rounding alone

    @property
    def delta(self) -> int | None:
        return None if self.measured is None else self.measured - self.planned

    @property
    def matches(self) -> bool:
        return self.measured is not None and abs(self.measured - self.planned) <= self.tolerance


def _measured(m: Measurements) -> dict[str, dict[str, int]]:
    return dict(m.tables())


def compare(
    plan: MemoryPlan,
    measurements: Measurements,
    before: ProcessMemory | None = None,
    after: ProcessMemory | None = None,
) -> list[BufferComparison]:
    """One row per (kind, device) either side has bytes for, GPUs first, host last. With process
    snapshots, a "process" row per device adds the plan's total beside what the load took there
    (NVML's figure for this process, else the device's memory in use; RSS on the host)."""
    gpu_names = [d.name for d in plan.gpus]
    rpc_buffers = rpc_buffer_names(plan.gpus)
    planned: dict[tuple[str, str], int] = {}
    for b in plan.buffers:
        key = (b.kind, device_of(b.device, gpu_names))
        planned[key] = planned.get(key, 0) + b.bytes
    measured: dict[tuple[str, str], int] = {}
    lines: dict[tuple[str, str], int] = {}
    for kind, sizes in _measured(measurements).items():
        for name, size in sizes.items():
            key = (kind, device_of(name, gpu_names, rpc_buffers))
            measured[key] = measured.get(key, 0) + size
            lines[key] = lines.get(key, 0) + 1
    anything_measured = bool(measured)
    rows = []
    for device in [*gpu_names, HOST]:
        for kind in KINDS:
            key = (kind, device)
            if key not in planned and key not in measured:
                continue
            # the projector's weights are known once an image has run through them: unmeasured until then
            unmeasured = None if kind.startswith("projector_") or not anything_measured else 0
            value = measured.get(key, unmeasured)
            rows.append(BufferComparison(kind, device, planned.get(key, 0), value, lines.get(key, 0) * LOG_ROUNDING))
        if before is not None and after is not None:
            rows.append(_process_row(plan, device, before, after))
    return rows


def compare_load(plan: MemoryPlan, report: LoadReport) -> list[BufferComparison]:
    """`compare` for what one load reported: its buffers, and the process before and after it."""
    return compare(plan, report.measurements, report.process_before, report.process)


def _process_row(plan: MemoryPlan, device: str, before: ProcessMemory, after: ProcessMemory) -> BufferComparison:
    usage = plan.host if device == HOST else next(d for d in plan.gpus if d.name == device)
    change = delta(before, after)
    key = "rss" if device == HOST else device
    return BufferComparison("process", device, usage.planned, change.get(key))


# -- per buffer, by llama.cpp's name (the dashboard's table) --------------------------------------


@dataclass(frozen=True)
class BufferLine:
    """One buffer: the plan's bytes, the dry run's and the allocated ones (None where a side has none).

    The dry run sized the plan's maximum context before the load, while `planned` and `actual` are
    for the context held now: `dry_planned` is the figure the dry run is set beside (the plan's, at
    that maximum), so that a context that has not grown yet still shows whether llama.cpp agreed."""

    name: str
    kind: str
    planned: int | None
    actual: int | None
    dry_run: int | None = None  # llama.cpp's no_alloc dry run, where it gave a figure for this buffer
    dry_planned: int | None = None  # the planner's figure for what the dry run sized

    @property
    def dry_matches(self) -> bool | None:
        """Whether the dry run agreed with the plan it sized (to the log's precision); None: no figure."""
        if self.dry_run is None or self.dry_planned is None:
            return None
        return abs(self.dry_run - self.dry_planned) <= LOG_ROUNDING

    @property
    def delta(self) -> int | None:
        if self.planned is None or self.actual is None:
            return None
        return self.actual - self.planned

    @property
    def matches(self) -> bool:
        d = self.delta
        return d is not None and abs(d) <= LOG_ROUNDING


def _by_name(m: Measurements) -> dict[tuple[str, str], int]:
    return {(kind, name): size for kind, table in m.tables() for name, size in table.items()}


def per_buffer(
    buffers: list[Buffer], measurements: Measurements | None, verification: Verification | None = None
) -> list[BufferLine]:
    """One row per buffer the plan (for the context held now) or llama.cpp names; a side that lacks it
    shows None. `verification` is llama.cpp's dry run before the load (of the plan's maximum context)."""
    actual = _by_name(measurements) if measurements is not None else {}
    rows: list[BufferLine] = []
    seen: set[tuple[str, str]] = set()
    per_device: dict[tuple[str, str], int] = {}
    for b in buffers:
        per_device[(b.kind, b.device)] = per_device.get((b.kind, b.device), 0) + 1
    for b in buffers:
        key = (b.kind, b.name)
        seen.add(key)
        gap = None
        if verification is not None and per_device[(b.kind, b.device)] == 1:
            gap = verification.gap(b.kind, b.device)
        rows.append(
            BufferLine(
                b.name,
                b.kind,
                b.bytes,
                actual.get(key) if measurements is not None else None,
                gap.measured if gap is not None else None,
                gap.planned if gap is not None else None,
            )
        )
    for (kind, name), size in actual.items():
        if (kind, name) not in seen:
            rows.append(BufferLine(name, kind, None, size))
    return rows
