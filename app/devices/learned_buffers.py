"""What a load showed that neither the plan nor llama.cpp's dry run did: the truth decides.

The planner's rules are exact where they were checked, and llama.cpp's dry run is read before each
load; where a load then allocates more than the plan said for a buffer (a rule not yet known for this
backend, say), that load's own figures, read from llama.cpp's log anyway, are kept here per model file,
device set and configuration. A later plan of the same model for the same devices and configuration
takes them (planner.measured.corrected) and says so, with the date of the load that showed them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable
from typing import Any

from app.devices.buffer_names import device_of
from app.paths import data_dir
from planner.measured import KINDS, Gap, corrected, gaps
from planner.memory import MemoryPlan

FILE_NAME = "learned-buffers.json"
MAX_ENTRIES = 200
TOLERANCE = 2 * ((1 << 20) // 200 + 1)  # two log lines' rounding (llama.cpp logs 0.01 MiB)


def _store() -> str:
    return os.fspath(data_dir() / FILE_NAME)


def plan_key(plan: MemoryPlan) -> str:
    """The model file (path, size, modification time), the devices it is planned for, and the configuration."""
    path = os.path.realpath(plan.model.path)
    try:
        st = os.stat(path)
        model = [os.fsencode(path).hex(), st.st_size, st.st_mtime_ns]
    except OSError:
        model = [os.fsencode(path).hex(), 0, 0]
    devices = [[d.name, d.backend, d.total] for d in plan.gpus]
    return hashlib.sha1(json.dumps([model, devices, repr(plan.config)]).encode()).hexdigest()


def _load() -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError), open(_store(), encoding="utf-8") as handle:
        data = json.loads(handle.read())
        if isinstance(data, dict):
            return data
    return {}


def remember(plan: MemoryPlan, measured: dict[tuple[str, str], int]) -> list[Gap]:
    """Keep what the load of `plan` allocated where it was more than planned (beyond the log's rounding);
    returns those figures. `measured`: bytes per (kind, device) as the plan keys its buffers."""
    found = gaps(plan, {k: v for k, v in measured.items() if k[0] in KINDS}, TOLERANCE)
    more = [g for g in found if not g.matches and g.delta > 0]
    data = _load()
    key = plan_key(plan)
    if not more and key not in data:
        return []
    if more:
        data[key] = {"when": time.time(), "figures": [[g.kind, list(g.devices), g.measured] for g in more]}
    else:
        data.pop(key, None)  # the plan now says what the load allocates: nothing left to correct
    if len(data) > MAX_ENTRIES:
        for old in sorted(data, key=lambda k: data[k].get("when", 0))[: len(data) - MAX_ENTRIES]:
            del data[old]
    _save(data)
    return more


def _save(data: dict[str, Any]) -> None:
    """Whole or not at all (a read-only data folder: nothing kept, the plan as it was)."""
    path = _store()
    tmp = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data))
        os.replace(tmp, path)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def lessons(plan: MemoryPlan) -> tuple[list[Gap], float]:
    """The figures an earlier load of this plan's model, devices and configuration allocated beyond it,
    beside the plan's own (and when that load was); ([], 0) where none is known."""
    entry = _load().get(plan_key(plan))
    if not isinstance(entry, dict):
        return [], 0.0
    measured: dict[tuple[str, str], int] = {}
    with contextlib.suppress(TypeError, ValueError):
        for kind, devices, size in entry.get("figures", []):
            measured[(str(kind), "+".join(str(d) for d in devices))] = int(size)
    found = [g for g in gaps(plan, measured, TOLERANCE) if g.delta > 0 and not g.matches]
    return found, float(entry.get("when", 0.0))


def with_lessons(plan: MemoryPlan) -> MemoryPlan:
    """`plan` with an earlier load's larger figures in place of its own, and a line saying so."""
    found, when = lessons(plan)
    if not found:
        return plan
    fixed = corrected(plan, found)
    day = time.strftime("%Y-%m-%d", time.localtime(when))
    fixed.estimates = [*plan.estimates, *(_line(g, day) for g in found)]
    return fixed


def _line(gap: Gap, day: str) -> str:
    return (
        f"{'+'.join(gap.devices)}: {gap.kind} {gap.measured / (1 << 20):,.1f} MiB, as a load of this model on "
        f"{day} allocated it ({gap.delta / (1 << 20):,.1f} MiB more than the rules say): the plan counts it"
    )


def measured_of(tables: Iterable[tuple[str, dict[str, int]]], gpu_names: list[str]) -> dict[tuple[str, str], int]:
    """A load's buffers (llama.cpp's names, `Measurements.tables()`) keyed as the plan keys them: (kind, device)."""
    out: dict[tuple[str, str], int] = {}
    for kind, sizes in tables:
        for name, size in sizes.items():
            key = (kind, device_of(name, gpu_names))
            out[key] = out.get(key, 0) + size
    return out
