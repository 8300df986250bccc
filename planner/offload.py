"""Where a plan's offloaded layers go, in words, when "the GPU" would be untrue.

llama.cpp offloads to every device it is given as to a GPU, an RPC server's too; but a server may
lend its CPU (`vramchat serve-rpc` on a machine without a GPU). A plan whose layers go to such a
device names it ("RPC0 (a remote CPU)") where the usual words say "the GPU"; the verdict itself
(full_gpu, partial_gpu) keeps its name, as the --plan JSON contract has it.
"""

from __future__ import annotations

from planner.memory import DeviceUsage, MemoryPlan


def _holders(plan: MemoryPlan) -> list[DeviceUsage]:
    return [d for d in plan.gpus if d.layers]


def lent_cpu_holds_layers(plan: MemoryPlan) -> bool:
    """Whether a remote CPU holds any of the offloaded layers (then "the GPU" is not the word)."""
    return any(d.remote_cpu for d in _holders(plan))


def offload_place(plan: MemoryPlan) -> str:
    """The devices that hold the offloaded layers, each remote CPU said as one: "RPC0 (a remote CPU)",
    "CUDA0 and RPC0 (a remote CPU)"; "" when no remote CPU holds any (the usual "the GPU" stands)."""
    if not lent_cpu_holds_layers(plan):
        return ""
    names = [f"{d.name} (a remote CPU)" if d.remote_cpu else d.name for d in _holders(plan)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def offload_short(plan: MemoryPlan) -> str:
    """The same devices by name alone, for a badge or a headline: "RPC0", "RPC0+RPC1"; "" as above."""
    if not lent_cpu_holds_layers(plan):
        return ""
    return "+".join(d.name for d in _holders(plan))


def the_gpu(plan: MemoryPlan | None) -> str:
    """What the words "on the GPU" should name for this plan: "the GPU", or the devices of offload_place."""
    return (offload_place(plan) if plan is not None else "") or "the GPU"


def offload_badge(plan: MemoryPlan) -> str:
    """What a fit badge says instead of "full GPU" where a remote CPU holds layers, as narrow as "full GPU"
    (a badge column holds its longest form): "RPC0 CPU"; "RPC CPUs" for several; "GPU+RPC" where a GPU
    holds layers beside them; "" when no remote CPU holds any."""
    holders = _holders(plan)
    if not lent_cpu_holds_layers(plan):
        return ""
    if not all(d.remote_cpu for d in holders):
        return "GPU+RPC"
    return f"{holders[0].name} CPU" if len(holders) == 1 else "RPC CPUs"
