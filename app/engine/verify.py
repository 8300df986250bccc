"""Before a load, ask llama.cpp: its dry run beside the plan, and what to do when they differ.

`verify(engine, path, plan)` runs the dry run in the engine process and sets its
figures beside the plan's, buffer kind by device (to the log's 0.01 MiB). When
every figure agrees, the plan stands (now confirmed, not estimated). When llama.cpp
needs more than planned, its figure wins (when it needs less, an exact rule's figure
stays): `confirm_plan` asks the solver again with that much less memory on the
devices concerned, checks the new plan the same way (a few rounds at most), and
returns the plan that llama.cpp's figures fit, with one line telling the user what
differed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from app.devices.buffer_names import device_of
from app.engine.dry_run import DryRun
from app.engine.llama_log import LOG_ROUNDING
from planner.config import LoadConfig
from planner.hardware import Device, Host, MiB, format_size
from planner.measured import Gap, corrected, extra_per_device, gaps, to_take
from planner.memory import MemoryPlan
from planner.rpc import rpc_buffer_names

MAX_ROUNDS = 3
_WORDS = {
    "kv": "KV cache",
    "kv_swa": "sliding-window KV cache",
    "recurrent": "recurrent state",
    "output": "output buffer",
    "compute": "compute",
}


class DryRunner(Protocol):
    def dry_run(self, path: str, config: LoadConfig) -> DryRun | None: ...


@dataclass
class Verification:
    """The plan beside llama.cpp's dry run."""

    dry_run: DryRun
    gaps: list[Gap] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.dry_run.ok and all(g.matches for g in self.gaps)

    @property
    def seconds(self) -> float:
        return self.dry_run.seconds

    def gap(self, kind: str, device: str) -> Gap | None:
        """The plan's figure beside llama.cpp's for one buffer kind (in the planner's words), when the
        dry run gave one for that device alone."""
        return next((g for g in self.gaps if g.kind == kind and g.devices == (device,)), None)

    def measured(self, kind: str, device: str) -> int | None:
        """llama.cpp's figure for one planned buffer (kind in the planner's words), when it gave one
        for that device alone."""
        gap = self.gap(kind, device)
        return gap.measured if gap is not None else None

    def differences(self) -> str:
        parts = []
        for g in self.gaps:
            if g.matches:
                continue
            more = "more" if g.delta > 0 else "less"
            parts.append(f"{abs(g.delta) / MiB:,.0f} MiB {more} {_WORDS.get(g.kind, g.kind)} on {'+'.join(g.devices)}")
        return "; ".join(parts)


def figures(dry: DryRun, gpu_names: list[str], rpc_buffers: dict[str, str] | None = None) -> dict[tuple[str, str], int]:
    """The dry run's figures keyed as the planner keys its buffers: (kind, device)."""
    out: dict[tuple[str, str], int] = {}
    for kind, sizes in dry.by_kind().items():
        for names, size in sizes.items():
            devices = sorted({device_of(n, gpu_names, rpc_buffers) for n in names.split("+")})
            key = (kind, "+".join(devices))
            out[key] = out.get(key, 0) + size
    return out


def verify(runner: DryRunner, path: str, plan: MemoryPlan) -> Verification | None:
    """The plan beside llama.cpp's dry run; None where the runner has no dry run (a fake engine)."""
    dry = runner.dry_run(path, plan.config)
    if dry is None:
        return None
    if not dry.ok:
        return Verification(dry)
    named = figures(dry, [d.name for d in plan.gpus], rpc_buffer_names(plan.gpus))
    return Verification(dry, gaps(plan, named, LOG_ROUNDING))


@dataclass
class Confirmed:
    plan: MemoryPlan  # the plan to load: corrected by llama.cpp's figures
    verification: Verification
    message: str = ""  # one line for the user when the dry run changed the plan; empty otherwise
    rounds: int = 1


def confirm_plan(
    runner: DryRunner,
    path: str,
    plan: MemoryPlan,
    gpus: list[Device],
    host: Host,
    replan: Callable[[list[Device], Host], MemoryPlan | None],
) -> Confirmed | None:
    """Dry-run `plan` and take llama.cpp's figures; while the plan then no longer fits, plan again
    with the shortfall taken from the devices concerned and check that plan the same way.
    `replan(gpus, host)` is the solver with the user's wishes (None: nothing fits). None where the
    runner has no dry run."""
    first = verify(runner, path, plan)
    if first is None:
        return None
    current, check = plan, first
    for rounds in range(1, MAX_ROUNDS + 1):
        if not check.dry_run.ok:  # llama.cpp refuses the configuration: the load will say why
            return Confirmed(current, check, "", rounds)
        taken = to_take(current, check.gaps)
        fixed = _on(corrected(current, taken), gpus, host)
        more = extra_per_device(taken)
        if fixed.fits or not any(v > 0 for v in more.values()) or rounds == MAX_ROUNDS:
            message = "" if (check.verified and current is plan) else _message(first, plan, fixed)
            return Confirmed(fixed, check, message, rounds)
        smaller = replan(_less(gpus, more), _less_host(host, more))
        if smaller is None:
            return Confirmed(fixed, check, _message(first, plan, fixed) + "; no smaller plan fits", rounds)
        again = verify(runner, path, smaller)
        if again is None:  # pragma: no cover - a runner answers every time or never
            return Confirmed(smaller, check, _message(first, plan, smaller), rounds)
        current, check = smaller, again
    raise AssertionError("unreachable")  # pragma: no cover


def _on(plan: MemoryPlan, gpus: list[Device], host: Host) -> MemoryPlan:
    """The plan's budgets on the real devices (a re-plan ran on devices made smaller)."""
    free = {d.name: d.free for d in gpus}
    for usage in plan.gpus:
        usage.free = free.get(usage.name, usage.free)
    plan.host.free = host.free
    return plan


def _less(gpus: list[Device], extra: dict[str, int]) -> list[Device]:
    return [replace(d, free=max(d.free - extra.get(d.name, 0), 0)) for d in gpus]


def _less_host(host: Host, extra: dict[str, int]) -> Host:
    return replace(host, free=max(host.free - extra.get("CPU", 0), 0))


def _message(first: Verification, before: MemoryPlan, after: MemoryPlan) -> str:
    from planner.retry import describe_changes

    changes = "; ".join(describe_changes(before, after)) or "the same configuration, which fits"
    kept = [g for g in first.gaps if g not in to_take(before, first.gaps)]
    if kept:
        changes += (
            " (the plan's larger figure kept where the dry run counts less: the plan's rule for it was checked "
            "against real loads, the dry run's estimate was not)"
        )
    return f"llama.cpp's dry run needs {first.differences()} than planned: {changes}"


def annotate_json(data: dict[str, Any], plan: MemoryPlan, confirmed: Confirmed) -> None:
    """`--plan --json --verify`: each buffer's `dry_run` (bytes, or null where llama.cpp reported nothing
    for it alone), and the plan's `verified`, `dry_run_seconds` and `dry_run_message`."""
    v = confirmed.verification
    counts: dict[tuple[str, str], int] = {}
    for b in plan.buffers:
        counts[(b.kind, b.device)] = counts.get((b.kind, b.device), 0) + 1
    for entry in data["buffers"]:
        key = (entry["kind"], entry["device"])
        entry["dry_run"] = v.measured(*key) if counts.get(key) == 1 else None
    data["verified"] = v.verified
    data["dry_run_seconds"] = round(v.seconds, 3)
    data["dry_run_message"] = confirmed.message
    data["dry_run_errors"] = list(v.dry_run.errors)


def table(plan: MemoryPlan, confirmed: Confirmed) -> str:
    """`--plan --verify`: the plan's figures beside llama.cpp's dry run."""
    v = confirmed.verification
    if not v.dry_run.ok:
        detail = "; ".join(v.dry_run.errors[-2:]) or "no reason given"
        return f"Dry run: llama.cpp could not build this configuration ({detail})"
    lines = [
        f"Dry run (llama.cpp on this machine, nothing allocated, {v.seconds:.2f} s): "
        + ("every figure as planned" if v.verified else "llama.cpp's figures differ")
    ]
    lines.append(f"  {'buffer':<26}{'device':<14}{'planned':>12}{'dry run':>12}")
    for g in v.gaps:
        mark = "" if g.matches else "  <-- differs"
        lines.append(
            f"  {_WORDS.get(g.kind, g.kind):<26}{'+'.join(g.devices):<14}{format_size(g.planned):>12}"
            f"{format_size(g.measured):>12}{mark}"
        )
    if confirmed.message:
        lines.append(f"  {confirmed.message}")
    return "\n".join(lines)
