"""What the device probes found, as one report for the planner, the CLI and the picker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.devices.advice import Mismatch
from app.devices.held import HeldMemory
from planner.hardware import HOST, Device, Host, LearnedOverhead

__all__ = ["HOST", "DeviceReport", "Probe"]  # HOST: the host's key in `held`, as llama.cpp names it


def to_json(learned: LearnedOverhead | None) -> dict[str, Any] | None:
    """What was learned of a device's overhead, as --devices --json prints it."""
    if learned is None:
        return None
    return {
        "context": learned.context,
        "runtime_flash_attn": learned.runtime_flash_attn,
        "runtime_cublas": learned.runtime_cublas,
        "loads": learned.loads,
        "replies": learned.replies,
        "raised_by": learned.raised_by or None,
    }


@dataclass
class Probe:
    """What one probe found, or why it could not look."""

    name: str  # llama.cpp, NVML, ROCm (pyrsmi), Metal, host, simulated
    available: bool
    detail: str  # what it found, or "unavailable: why"
    devices: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DeviceReport:
    """The devices the planner plans for, with every probe's findings and warnings."""

    gpus: list[Device]  # what the planner plans for: the GPUs llama.cpp can use
    host: Host
    probes: list[Probe]
    warnings: list[str] = field(default_factory=list)
    # device name ("CPU" for host RAM) -> memory other processes hold there
    held: dict[str, HeldMemory] = field(default_factory=dict)
    mismatches: list[Mismatch] = field(default_factory=list)
    simulated: bool = False
    # what a backend's free memory means here, and what was corrected (app.devices.free_memory)
    notes: list[str] = field(default_factory=list)

    @property
    def held_by_others(self) -> dict[str, int]:
        """GPU name -> bytes other processes hold on it (where a probe can tell)."""
        return {name: h.bytes for name, h in self.held.items() if name != HOST}

    def probe(self, name: str) -> Probe | None:
        return next((p for p in self.probes if p.name == name), None)

    def to_json(self) -> dict[str, Any]:
        def held(name: str) -> dict[str, Any] | None:
            h = self.held.get(name)
            return h.to_json() if h else None

        return {
            "simulated": self.simulated,
            "gpus": [
                {
                    "name": d.name,
                    "backend": d.backend,
                    "total": d.total,
                    "free": d.free,
                    "unified": d.unified,
                    "description": d.description,
                    "bandwidth": d.bandwidth,
                    "bandwidth_source": d.bandwidth_source,
                    "held_by_others": self.held_by_others.get(d.name),
                    "held": held(d.name),
                    "identity": {
                        "card": d.card or None,
                        "sm_count": d.sm_count,
                        "threads_per_sm": d.threads_per_sm,
                        "compute_capability": d.compute_capability,
                        "driver": d.driver or None,
                        "bandwidth": d.bandwidth,
                        "bandwidth_source": d.bandwidth_source or None,
                    },
                    "learned_overhead": to_json(d.learned),
                }
                for d in self.gpus
            ],
            "host": {
                "total": self.host.total,
                "free": self.host.free,
                "swap_free": self.host.swap_free,
                "cpu_features": sorted(self.host.cpu_features),
                "held": held(HOST),
            },
            "probes": [
                {"name": p.name, "available": p.available, "detail": p.detail, "devices": p.devices}
                for p in self.probes
            ],
            "mismatches": [m.to_json() for m in self.mismatches],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }
