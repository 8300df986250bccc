"""What memory is free where: the device probes (app.devices.machine) and what they report.

The package itself loads no probe. `from app.devices import probe_devices` loads them when first asked,
and a module that needs only a report's shape (app.devices.probes) loads without them: the app's first
frame takes a report its probe process made (app.tui.early_probe) without importing a probe, ctypes or
NVML's bindings."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.devices.advice import Mismatch
    from app.devices.held import HeldMemory
    from app.devices.machine import mismatch_notice, probe_devices
    from app.devices.probes import DeviceReport, Probe
    from app.devices.simulated import ENV_VAR

__all__ = ["ENV_VAR", "DeviceReport", "HeldMemory", "Mismatch", "Probe", "mismatch_notice", "probe_devices"]

_HOMES = {
    "ENV_VAR": "simulated",
    "DeviceReport": "probes",
    "HeldMemory": "held",
    "Mismatch": "advice",
    "Probe": "probes",
    "mismatch_notice": "machine",
    "probe_devices": "machine",
}


def __getattr__(name: str) -> Any:
    """The package's names, each loaded from its module on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'app.devices' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"app.devices.{home}"), name)
    globals()[name] = value
    return value
