"""Device memory now, for the telemetry sampler: name -> (used, total) in bytes.

Real GPUs are read through llama.cpp's own device API (the devices the engine
allocates on), host RAM through psutil. Simulated devices (--vram,
VRAMCHAT_DEVICES, --ram) follow the plan instead: a simulated GPU holds what
others hold on it, plus the plan's usage of it once a model is loaded, so
screenshots and tests see the same figures on every machine.
"""

from __future__ import annotations

from collections.abc import Callable

from app.devices import ggml, host
from app.devices.probes import HOST, DeviceReport
from planner.memory import MemoryPlan

Reading = dict[str, tuple[int, int]]


def _never_loaded() -> bool:
    return False


class GpuMemoryReader:
    """The report's GPUs as llama.cpp sees them now, or as simulated. `plan_now()` is the plan for
    what is allocated now (a context that grows holds less than `plan`, its maximum)."""

    def __init__(
        self,
        report: DeviceReport,
        plan: MemoryPlan | None = None,
        loaded: Callable[[], bool] = _never_loaded,
        plan_now: Callable[[], MemoryPlan | None] | None = None,
        allocated: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.names = [d.name for d in report.gpus]
        # per GPU, the bytes llama.cpp allocated there (its log), for devices no driver library reads live
        self._allocated = allocated
        self.unread: set[str] = set()  # devices read from llama.cpp's buffers, not from the driver
        self.simulated = report.simulated
        self._base = {d.name: (d.total - d.free, d.total) for d in report.gpus}
        self._plan = plan
        self._plan_now = plan_now
        self._loaded = loaded
        # an RPC server serves one client at a time, and while a model is loaded that client is the
        # engine: its devices read as the server reported them at the probe, plus the plan's buffers
        self.remote = [d.name for d in report.gpus if d.backend == "rpc"]

    @property
    def _planned(self) -> dict[str, int]:
        plan = (self._plan_now() if self._plan_now is not None else None) or self._plan
        return {d.name: d.planned for d in plan.gpus} if plan is not None else {}

    def _as_planned(self, names: list[str]) -> Reading:
        extra = self._planned if self._loaded() else {}
        return {name: (self._base[name][0] + extra.get(name, 0), self._base[name][1]) for name in names}

    def __call__(self) -> Reading:
        if not self.names:
            return {}
        if self.simulated:
            return self._as_planned(self.names)
        local = [name for name in self.names if name not in self.remote]
        memory = ggml.gpu_memory() if local else {}
        reading = {name: (total - free, total) for name, (free, total) in memory.items() if name in local}
        # a Vulkan (or SYCL, or Metal from another process) device has no driver library the app reads while
        # the engine holds it: what llama.cpp allocated there stands for its use (lavapipe reports no budget)
        self.unread = {name for name in local if name not in reading}
        return reading | self._as_allocated(sorted(self.unread)) | self._as_planned(self.remote)

    def _as_allocated(self, names: list[str]) -> Reading:
        if not names:
            return {}
        if self._allocated is None:
            return self._as_planned(names)
        extra = self._allocated() if self._loaded() else {}
        return {name: (self._base[name][0] + extra.get(name, 0), self._base[name][1]) for name in names}


class HostMemoryReader:
    """Host RAM: psutil's view (in use: what is not available), or the simulated RAM plus the plan's
    host buffers once loaded; mapped weights are file cache, available to others, as psutil counts them."""

    def __init__(
        self,
        report: DeviceReport,
        plan: MemoryPlan | None = None,
        loaded: Callable[[], bool] = _never_loaded,
        plan_now: Callable[[], MemoryPlan | None] | None = None,
    ) -> None:
        self.simulated = report.host.simulated
        self._base = (report.host.total - report.host.free, report.host.total)
        self._plan = plan
        self._plan_now = plan_now
        self._loaded = loaded

    @property
    def _planned(self) -> int:
        plan = (self._plan_now() if self._plan_now is not None else None) or self._plan
        return plan.host.planned - plan.host.weights_mapped if plan is not None else 0

    def __call__(self) -> Reading:
        if self.simulated:
            used, total = self._base
            return {HOST: (used + (self._planned if self._loaded() else 0), total)}
        return {HOST: host.ram_in_use()}
