"""The next, smaller plan after a load (or a decode) failed for want of memory.

A failed allocation means a device had less memory than the plan counted on:
another process took some, a driver kept more than expected, or the plan was
wrong. The rule is the solver's own, run again with less memory:

- a GPU that failed (every GPU in use when the log does not say which) is
  offered only SHRINK of what the failed plan used on it, at least MIN_CUT less;
  the solver then gives way in its usual order (context down to 4,096 tokens,
  then experts to the CPU, then whole layers, then a quantized KV cache);
- host RAM that failed holds every layer the GPU does not, so dropping layers
  cannot help it: the context is halved instead (down to 512 tokens);
- no device is offered more than the failed plan used on it.

Each step asks strictly less of the failing device, so retries end: at
MAX_RETRIES, or when nothing smaller fits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from planner.errors import PlannerError
from planner.fit import SMALLEST_CONTEXT, FitResult, Wishes, solve
from planner.hardware import Device, Host, MiB, format_size
from planner.memory import DeviceUsage, MemoryPlan, plan_memory
from planner.model import ModelAnatomy

SHRINK = 0.85
MIN_CUT = 256 * MiB
MAX_RETRIES = 3


@dataclass
class Retry:
    """A smaller plan to try, and what changed from the one that failed, in words."""

    result: FitResult
    changes: list[str]

    @property
    def plan(self) -> MemoryPlan:
        return self.result.plan

    def describe(self) -> str:
        return "; ".join(self.changes)


def safer_plan(
    model: ModelAnatomy,
    failed: MemoryPlan,
    gpus: list[Device],
    host: Host,
    wishes: Wishes | None = None,
    failed_devices: set[str] | None = None,
) -> Retry | None:
    """The plan to retry with after `failed` could not be allocated, or None when nothing smaller fits.

    `failed_devices` names the pools that refused (CUDA0, CPU ...) when the log said so.
    """
    wishes = wishes or wishes_for(failed)
    used_gpus = [d for d in failed.gpus if d.planned and d.layers]
    if failed_devices:
        blamed = [d for d in used_gpus if d.name in failed_devices]
        host_failed = "CPU" in failed_devices or not blamed
    else:
        blamed = used_gpus
        host_failed = not used_gpus

    # no device is offered more than the failed plan used on it; the blamed ones less. What a device is now
    # known to hold beside the buffers (the failure itself taught it: app.devices.learned_overhead) is
    # added to its budget: the new plan counts it, and the shrink already asks for less, so it counts once
    budgets = {d.name: d.planned for d in failed.gpus}
    budgets.update({d.name: _shrunk(d) for d in blamed})
    rises = _overhead_rises(model, failed, gpus, host)
    gpus = [
        _offer(g, budgets[g.name] + rises.get(g.name, 0), _usage(failed, g.name)) if g.name in budgets else g
        for g in gpus
    ]
    if host_failed:
        ctx = failed.resolved.n_ctx // 2
        if ctx < SMALLEST_CONTEXT:
            return None
        wishes = dataclasses.replace(wishes, n_ctx=ctx)
    elif not wishes.n_ctx or wishes.n_ctx > failed.resolved.n_ctx:
        # never ask for more context than the load that failed
        wishes = dataclasses.replace(wishes, n_ctx=failed.resolved.n_ctx)

    result = solve(model, gpus, host, wishes)
    if not result.plan.fits:
        return None
    changes = describe_changes(failed, result.plan)
    if not changes:
        return None
    return Retry(result, changes)


def wishes_for(plan: MemoryPlan) -> Wishes:
    """The wishes behind a plan, for a retry: its context at most, its KV type first, its margins;
    flash attention and the solver's other KV types allowed, since they save memory."""
    c = plan.config
    kv_types = (c.type_k, *(t for t in Wishes().kv_types if t != c.type_k))
    return Wishes(
        n_ctx=plan.resolved.n_ctx,
        kv_types=kv_types,
        flash_attn="auto",
        n_batch=c.n_batch,
        n_ubatch=c.n_ubatch,
        n_seq_max=c.n_seq_max,
        swa_full=c.swa_full,
        use_mmap=c.use_mmap,
        margins={d.name: d.margin for d in [*plan.gpus, plan.host]},
        cpu_extra_buffers=c.cpu_extra_buffers,
        projector=plan.projector,
    )


def _overhead_rises(model: ModelAnatomy, failed: MemoryPlan, gpus: list[Device], host: Host) -> dict[str, int]:
    """How much more each device is known to hold beside the buffers than when `failed` was planned (the
    devices read again after the failure carry what it taught)."""
    if not any(g.learned is not None for g in gpus):
        return {}
    try:
        now = plan_memory(model, failed.config, gpus, host, with_compute=False, projector=failed.projector)
    except PlannerError:
        return {}
    before = {d.name: d.overhead for d in failed.gpus}
    return {d.name: d.overhead - before[d.name] for d in now.gpus if d.name in before and d.overhead > before[d.name]}


def _shrunk(usage: DeviceUsage) -> int:
    return min(int(usage.planned * SHRINK), usage.planned - MIN_CUT)


def _usage(plan: MemoryPlan, name: str) -> DeviceUsage:
    return next(d for d in plan.gpus if d.name == name)


def _offer(device: Device, budget: int, usage: DeviceUsage) -> Device:
    """The device as if only `budget` bytes were available to the plan (after its margin)."""
    free = max(0, budget) + usage.margin + usage.shared
    return dataclasses.replace(device, free=min(device.free, free))


def describe_changes(before: MemoryPlan, after: MemoryPlan) -> list[str]:
    """What a user needs to know about the new plan, one change per item."""
    changes = []
    units = before.model.n_layer + 1
    if after.layers_on_gpu != before.layers_on_gpu:
        changes.append(f"GPU layers {before.layers_on_gpu} → {after.layers_on_gpu} of {units}")
    if after.config.n_cpu_moe != before.config.n_cpu_moe:
        changes.append(f"experts of {after.config.n_cpu_moe} layers in host memory (was {before.config.n_cpu_moe})")
    if after.resolved.n_ctx != before.resolved.n_ctx:
        changes.append(f"context {before.resolved.n_ctx:,} → {after.resolved.n_ctx:,} tokens")
    kv_before, kv_after = _kv_name(before), _kv_name(after)
    if kv_before != kv_after:
        changes.append(f"KV cache {kv_before} → {kv_after}")
    if after.config.flash_attn != before.config.flash_attn:
        changes.append(f"flash attention {'on' if after.config.flash_attn else 'off'}")
    for b, a in zip(before.gpus, after.gpus):
        if a.overhead > b.overhead and a.planned - a.overhead < b.planned - b.overhead:
            # the device holds more beside the buffers than planned: the buffers are what shrank
            changes.append(
                f"{a.name} buffers {format_size(b.planned - b.overhead)} → {format_size(a.planned - a.overhead)} "
                f"(it holds {format_size(a.overhead - b.overhead)} more beside them than planned)"
            )
        elif a.planned < b.planned:
            changes.append(f"{a.name} {format_size(b.planned)} → {format_size(a.planned)}")
    if after.host.planned < before.host.planned and not after.gpus:
        changes.append(f"host RAM {format_size(before.host.planned)} → {format_size(after.host.planned)}")
    return changes


def _kv_name(plan: MemoryPlan) -> str:
    k, v = plan.resolved.type_k.name, plan.resolved.type_v.name
    return k if k == v else f"{k}/{v}"
