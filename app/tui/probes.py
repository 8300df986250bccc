"""Live memory probes for the dashboard, wired into `app.telemetry.Telemetry`.

Real GPUs are read through llama.cpp's device API; simulated GPUs (VRAMCHAT_DEVICES,
--vram) hold what other processes were said to hold plus what the plan puts there,
since nothing is really allocated on them. Host RAM comes from psutil.
"""

from __future__ import annotations

from collections.abc import Callable

from app.devices import DeviceReport
from app.telemetry import Telemetry
from planner.memory import MemoryPlan

MemoryReader = Callable[[], dict[str, tuple[int, int]]]


def memory_reader(report: DeviceReport, plan: MemoryPlan | None) -> MemoryReader:
    planned = {d.name: d.planned for d in plan.gpus} if plan else {}
    simulated = {d.name: (d.total - d.free + planned.get(d.name, 0), d.total) for d in report.gpus if d.simulated}
    real_names = [d.name for d in report.gpus if not d.simulated]
    host = report.host

    def read() -> dict[str, tuple[int, int]]:
        out = dict(simulated)
        if real_names:
            from app.devices import ggml

            for dev in ggml.list_devices():
                if dev.name in real_names:
                    out[dev.name] = (dev.total - dev.free, dev.total)
        if host.simulated:
            from app.devices.host import process_rss

            out["RAM"] = (min(host.total - host.free + process_rss(), host.total), host.total)
        else:
            import psutil

            vm = psutil.virtual_memory()
            out["RAM"] = (int(vm.total - vm.available), int(vm.total))
        return out

    return read


def make_telemetry(engine: object, report: DeviceReport, plan: MemoryPlan | None,
                   kv_allocated: int, compute: dict[str, int],
                   speed: Callable[[], tuple[float, bool]]) -> Telemetry:
    from app.devices.host import process_rss

    return Telemetry(memory=memory_reader(report, plan), rss=process_rss, engine=engine,  # type: ignore[arg-type]
                     kv_layout=plan.kv if plan else None, kv_allocated=kv_allocated, compute=dict(compute),
                     speed=speed)
