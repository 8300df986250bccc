"""Each GPU's memory bandwidth, for the speed prediction (planner.speed): NVML's memory clock x bus width.

Other vendors' probes report no clock here; their GPUs keep `bandwidth=None` and the prediction
says so rather than guess. (A short copy timed on the device would confirm the figure; no probe
here runs one yet, so NVML's is the spec sheet's, and the plan calls it a table figure.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from app.devices import pci
from app.devices.ggml import GGMLDevice
from app.devices.nvml import NvmlGpu
from planner.hardware import Device


def with_bandwidth(gpus: list[Device], llama_gpus: Sequence[GGMLDevice], nvidia: Sequence[NvmlGpu]) -> list[Device]:
    """`gpus` with the bandwidth of each NVIDIA GPU NVML matched to llama.cpp's device."""
    matched = pci.match(llama_gpus, [g for g in nvidia if not g.error], "cuda")
    out = []
    for d in gpus:
        g = matched.get(d.name)
        if g is not None and g.bandwidth:
            source = f"NVML: {g.memory_clock_mhz:,} MHz x 2 x {g.bus_width_bits}-bit bus (the spec sheet's figure)"
            d = dataclasses.replace(d, bandwidth=g.bandwidth, bandwidth_source=source)
        out.append(d)
    return out
