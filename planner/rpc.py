"""What a device lent through llama.cpp's RPC backend costs beyond its buffers: the network.

Every layer on an RPC device runs on the server, so each token's hidden state crosses the
network at each hand-off between devices, and the weights are sent over it once at load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from planner.hardware import format_size

if TYPE_CHECKING:
    from planner.hardware import Device
    from planner.memory import DeviceUsage, MemoryPlan
    from planner.model import ModelAnatomy


def activation_bytes(model: ModelAnatomy, n_tokens: int) -> int:
    """The hidden state handed from one device to the next for `n_tokens` tokens (F32 rows)."""
    return model.n_embd * 4 * n_tokens


def network_notes(plan: MemoryPlan, devices: list[Device]) -> list[str]:
    """One line per RPC device that holds layers: what crosses the network, at load and per token."""
    by_name = {d.name: d for d in devices}
    n_ubatch = plan.resolved.n_ubatch
    notes = []
    for usage in plan.gpus:
        device = by_name.get(usage.name)
        if device is None or device.backend != "rpc" or not usage.layers:
            continue
        where = f"{device.name} ({device.description})" if device.description else device.name
        notes.append(
            f"{where} is another machine's, through llama.cpp's RPC: loading sends it "
            f"{format_size(usage.weights)} of weights over the network, and every token crosses it both ways "
            f"({format_size(activation_bytes(plan.model, 1))} per generated token, "
            f"{format_size(activation_bytes(plan.model, n_ubatch))} per {n_ubatch}-token prompt batch)"
        )
    return notes


def rpc_buffer_names(devices: Sequence[Device | DeviceUsage]) -> dict[str, str]:
    """llama.cpp names an RPC device's buffers `RPC<its index on the server>[HOST:PORT]` (its device
    RPC<n>, numbered across servers): buffer name -> device name."""
    out: dict[str, str] = {}
    per_server: dict[str, int] = {}
    for d in devices:
        if d.backend != "rpc":
            continue
        index = per_server.get(d.description, 0)
        per_server[d.description] = index + 1
        out[f"RPC{index}[{d.description}]"] = d.name
    return out
