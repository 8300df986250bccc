"""The drift alarm: a GPU holding more than the plan said, while the model runs.

Fed by the telemetry's samples (app.telemetry, about 2 Hz). Each device's free memory is compared
with its free memory when the plan was made, from the same source (free with free: NVML's total
includes a driver reserve that CUDA's leaves out): what has gone since should be the plan's total
for the context held now. Beyond the tolerance (2% of the plan or 64 MiB, the bar the H100 record
is held to), or on Windows when the device's memory is all but gone (the driver then spills to
shared system memory, 5-20x slower, instead of failing), the alarm says so in one line with the
likely cause, once per device and load, and records the excess (app.devices.learned_overhead), so
the next plan for that GPU counts it.

A device no driver library reads while the engine holds it (Vulkan: lavapipe reports no memory budget; the
telemetry's sample names it `unread`) has for its use what llama.cpp allocated there. On it the watch compares
those allocations with the plan's buffers (its total less the backend overhead estimate, which no allocation
shows), and says once, on screen, what it cannot see: memory another program takes on that device.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from planner.hardware import Device, MiB, format_size
from planner.memory import MemoryPlan

TOLERANCE_FLOOR = 64 * MiB
TOLERANCE_SHARE = 0.02
SPILL_FLOOR = 64 * MiB  # free memory this low on Windows: the driver is about to spill, or has


def tolerance(planned: int) -> int:
    return max(TOLERANCE_FLOOR, int(TOLERANCE_SHARE * planned))


@dataclass(frozen=True)
class DriftAlarm:
    device: str
    taken: int  # free memory gone since the plan was made (free then - free now)
    planned: int  # the plan's total for the context held now
    free: int  # free memory now
    spill: bool
    cause: str
    recorded: bool

    @property
    def excess(self) -> int:
        return self.taken - self.planned

    @property
    def line(self) -> str:
        if self.spill:
            head = f"{self.device} is full ({format_size(self.free)} free): {self.cause}"
        else:
            head = (
                f"{self.device} holds {format_size(self.excess)} more than planned ({format_size(self.taken)} taken "
                f"since the plan, {format_size(self.planned)} planned): likely {self.cause}"
            )
        return head + (". Recorded: the next plan for this GPU counts it." if self.recorded else ".")


def likely_cause(plan: MemoryPlan, device: Device) -> str:
    """The likeliest reason a device holds more than planned, from what the plan knows of it."""
    if device.backend in ("cuda", "rocm") and not plan.config.flash_attn:
        return "ggml-cuda's memory pool growing with the conversation (flash attention is off)"
    if device.learned is None:
        return (
            "this GPU's runtime (driver context, kernels, library workspaces) beyond the derived figure, "
            "or another program took memory"
        )
    return "another program took memory on this GPU, or the runtime grew past what was learned"


SPILL_CAUSE = (
    "Windows may be moving memory to shared system memory, which makes every token 5-20x slower. Load a "
    "smaller plan, or set 'CUDA - Sysmem Fallback Policy' to 'Prefer No Sysmem Fallback' in the NVIDIA Control "
    "Panel so that an over-allocation fails instead"
)

# (device, used, total) -> (whether the learned figure rose, the cause when the reading knows it better)
Recorder = Callable[[str, int, int], tuple[bool, str | None]]
OTHERS_CAUSE = "another program took memory on this GPU (NVML: vramchat's engine holds what was planned)"
UNREAD_CAUSE = "a buffer the planner does not price (llama.cpp's allocations on it against the plan's buffers)"


def unread_note(device: str) -> str:
    """What the watch says once of a device whose memory is known only from llama.cpp's allocations."""
    return (
        f"{device} reports no free memory: the drift alarm compares what llama.cpp allocated there with the "
        "plan's buffers, and cannot see memory other programs take on it."
    )


class DriftWatch:
    """Checks each sample against the plan; `alarms` holds what was raised (one per device)."""

    def __init__(
        self,
        devices: list[Device],
        plan_now: Callable[[], MemoryPlan | None],
        record: Recorder | None = None,
        on_alarm: Callable[[DriftAlarm], None] | None = None,
        platform: str = sys.platform,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        # each GPU's free memory when the plan was made
        self._free = {d.name: d.free for d in devices if d.is_gpu and d.backend != "rpc"}
        self._devices = {d.name: d for d in devices}
        self._plan_now = plan_now
        self._record = record
        self._on_alarm = on_alarm
        self._on_note = on_note
        self._platform = platform
        self._lock = threading.Lock()
        self.alarms: dict[str, DriftAlarm] = {}
        self.notes: dict[str, str] = {}  # per device read from llama.cpp's allocations: what the watch cannot see

    @property
    def line(self) -> str:
        """The alarms, one line each (empty while there is none)."""
        with self._lock:
            return "\n".join(a.line for a in self.alarms.values())

    def check(self, sample: object) -> list[DriftAlarm]:
        """Compare one telemetry sample (anything with `devices`: name -> (used, total)) with the plan."""
        plan = self._plan_now()
        readings: dict[str, tuple[int, int]] = getattr(sample, "devices", {})
        unread: frozenset[str] = frozenset(getattr(sample, "unread", ()))
        if plan is None:
            return []
        self._note(unread & set(self._free))
        # a device read from llama.cpp's allocations holds the plan's buffers, not its overhead estimate
        planned = {d.name: d.planned - (d.overhead if d.name in unread else 0) for d in plan.gpus}
        raised = []
        for name, (used, total) in readings.items():
            if name not in self._free or name not in planned or name in self.alarms:
                continue
            free = max(total - used, 0)
            taken = self._free[name] - free
            spill = self._platform == "win32" and total > 0 and free <= max(SPILL_FLOOR, total // 100)
            spill = spill and name not in unread
            if taken - planned[name] <= tolerance(planned[name]) and not spill:
                continue
            device = self._devices[name]
            known: str | None = UNREAD_CAUSE
            recorded = False  # llama.cpp's own buffers on an unread device: the load's figure is learned at the load
            if name not in unread:
                recorded, known = self._record(name, used, total) if self._record is not None else (False, None)
            cause = SPILL_CAUSE if spill else known or likely_cause(plan, device)
            alarm = DriftAlarm(name, taken, planned[name], free, spill, cause, recorded)
            with self._lock:
                self.alarms[name] = alarm
            raised.append(alarm)
            if self._on_alarm is not None:
                self._on_alarm(alarm)
        return raised

    def _note(self, names: AbstractSet[str]) -> None:
        for name in sorted(names - set(self.notes)):
            with self._lock:
                self.notes[name] = unread_note(name)
            if self._on_note is not None:
                self._on_note(self.notes[name])
