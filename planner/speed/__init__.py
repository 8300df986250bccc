"""How fast a plan will run: decode and prefill tokens per second, before the load.

One module a step of the derivation, each importing only those above it:
- basis.py: where a figure comes from (measured, learned, table, measuring, unknown) and how wide
  its range is;
- machine.py: this machine's figures (CpuSpeed: what the CPU probe timed; GpuSpeed: a GPU's bandwidth);
- cost.py: what one decoded token reads, multiplies and runs on each device, from the plan (TokenCost);
- timing.py: the rules that make seconds of a cost and the figures: a token's on each device, the
  fixed costs, a prompt's (attention tiles, the host's work per batch);
- prediction.py: what a plan shows (SpeedPrediction: decode at the start and at a full context, a
  prompt's prefill, each a Figure with its range), learned from real replies (Calibration).

The names the app uses are here; the rules' own constants and parts are in their modules.
"""

from __future__ import annotations

from planner.speed.basis import ENOUGH_REPLIES, LEARNED, MAX_RATIOS, MEASURED, MEASURED_BAND, PENDING, TABLE, UNKNOWN
from planner.speed.cost import DeviceCost, TokenCost, token_cost
from planner.speed.machine import CpuSpeed, GpuSpeed
from planner.speed.prediction import (
    Calibration,
    DeviceSpeed,
    Figure,
    SpeedPrediction,
    predict,
    predicted_decode,
    predicted_prefill,
)

__all__ = [
    "ENOUGH_REPLIES",
    "LEARNED",
    "MAX_RATIOS",
    "MEASURED",
    "MEASURED_BAND",
    "PENDING",
    "TABLE",
    "UNKNOWN",
    "Calibration",
    "CpuSpeed",
    "DeviceCost",
    "DeviceSpeed",
    "Figure",
    "GpuSpeed",
    "SpeedPrediction",
    "TokenCost",
    "predict",
    "predicted_decode",
    "predicted_prefill",
    "token_cost",
]
