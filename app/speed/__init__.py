"""The speed prediction where the user decides (--plan, --list, the picker) and the learning from replies.

One function gives a file's speed wherever it is shown: `file_speed` (a plan's per-token cost,
the file, its learning keys); `predict_plan` (a plan and the devices it is for) and
`predict_summary` (a model list's row, from the cost kept in the plan cache) only bring it
those; `learn_from_reply` is the
reply path's hook (never raises, keeps nothing it cannot compare). The formula is
planner.speed's; this module brings this machine's figures (app.speed.machine) and what
earlier replies taught (app.speed.learn).

The room: this module the prediction; probe.py the CPU's own figures (ggml's mat-vec, run in a child),
machine.py those figures kept once per machine, learn.py every finished reply's speed against its
prediction (each GPU's memory bandwidth is the device report's: app/devices/bandwidth.py). The formula
itself stays in the planner (planner/speed/), which imports nothing of the app.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.devices.probes import DeviceReport
    from app.engine.types import GenerationStats

    # the planner is imported when a speed is asked for: the reply path imports this module
    from planner.hardware import Device
    from planner.memory import MemoryPlan
    from planner.speed import GpuSpeed, SpeedPrediction, TokenCost


def gpu_speeds(gpus: list[Device]) -> dict[str, GpuSpeed]:
    """Each GPU's bandwidth figure, or the words that say why there is none."""
    from app.speed.vulkan_basis import vulkan_speed
    from planner.speed import GpuSpeed

    out = {}
    for d in gpus:
        if d.bandwidth:
            out[d.name] = GpuSpeed(d.name, d.bandwidth, d.bandwidth_source or "reported by the device")
        elif d.simulated:
            out[d.name] = GpuSpeed(
                d.name,
                None,
                "a what-if card with no memory bandwidth given (add bw=, e.g. VRAMCHAT_DEVICES=24GiB,bw=1008GB/s)",
            )
        elif d.backend == "vulkan":  # no memory clock from any table: timed on the device (app/speed/vulkan_basis.py)
            out[d.name] = vulkan_speed(d)
        else:
            out[d.name] = GpuSpeed(d.name, None, f"no memory bandwidth reported for {d.name} ({d.backend})")
    return out


def _what_if(gpus: list[Device]) -> bool:
    return any(d.simulated for d in gpus)


def file_speed(
    cost: TokenCost, file: str, devices: str, config: str, gpus: list[Device], measure: bool = True
) -> SpeedPrediction:
    """THE speed of one model file planned one way: what every screen and command shows for it (the
    model list, the hub, --plan, --quants, the picker; `SpeedPrediction.cell` is its table text), so
    that one file shows one figure. `cost` is the plan's per-token cost; `file` the model's path or
    hub reference (a downloaded hub file counts as its local copy: the replies taught on it apply);
    `devices` and `config` the learning keys (app.speed.learn). With this machine's figures, or
    "measuring…" while no trusted probe exists, and what its replies taught."""
    from app.speed.learn import calibration, model_key
    from app.speed.machine import cpu_speed, waiting
    from planner.speed import predict

    cpu, why = cpu_speed(measure)
    speeds = gpu_speeds(gpus)
    cal = None if _what_if(gpus) else calibration(model_key(_local_copy(file)), devices, config, cpu, speeds)
    prediction = predict(cost, cpu, speeds, cal, cpu_pending=why if cpu is None and waiting(why) else "")
    if cpu is None:
        prediction.notes.insert(0, f"CPU: {why}")
    return prediction


def _local_copy(file: str) -> str:
    """A hub or URL model's file on this machine when it is downloaded whole, else `file` itself."""
    if os.path.exists(file):  # a local file (app.sources is not imported for it)
        return file
    from app.sources import is_remote, known_source

    source = known_source(file) if is_remote(file) else None
    if source is None:  # a local file, or one this process has not listed (no network asked here)
        return file
    try:
        from app.sources.download import plan_download

        download = plan_download(source, with_projector=False)
    except Exception:  # not downloadable here: the reference is its identity
        return file
    return str(download.model_path) if not download.files else file


def predict_plan(plan: MemoryPlan, gpus: list[Device], measure: bool = True) -> SpeedPrediction:
    """`file_speed` of a plan, on `gpus` (the device report's, which carry the bandwidths) and this CPU."""
    from app.speed.learn import config_key, devices_key
    from planner.speed import token_cost

    return file_speed(token_cost(plan), plan.model.path, devices_key(plan), config_key(plan), gpus, measure)


def plan_speed(plan: MemoryPlan, gpus: list[Device]) -> SpeedPrediction:
    """`predict_plan` for the places a plan is shown: a failure becomes an unknown figure with its
    reason, never a failed plan."""
    try:
        return predict_plan(plan, gpus)
    except Exception as exc:
        return unknown(f"the speed could not be predicted ({type(exc).__name__}: {exc})", plan.resolved.n_ctx)


def unknown(why: str, n_ctx: int) -> SpeedPrediction:
    from planner.speed import UNKNOWN, Figure, SpeedPrediction

    figure = Figure(None, None, None, UNKNOWN, why)
    return SpeedPrediction(figure, figure, figure, n_ctx, [], [why])


def decode_speed_of(plan: MemoryPlan, gpus: list[Device]) -> float | None:
    """Decode tok/s at the start of a chat (learned where replies taught it): the solver's --min-speed test."""
    return predict_plan(plan, gpus).decode_start.value


def decode_speed_for(gpus: list[Device]) -> Callable[[MemoryPlan], float | None]:
    """`decode_speed_of` for these devices, as the solver's Wishes.decode_speed takes it."""
    return lambda plan: decode_speed_of(plan, gpus)


def tokens_per_second(text: str) -> float:
    """--min-speed's argument: a positive number of tokens per second (an argparse type)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tokens per second") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of tokens per second")
    return value


def list_speed(entry: Any, gpus: list[Device]) -> dict[str, Any] | None:
    """A model list entry's `speed` object (`--list --json`), or None where it has no plan."""
    s = entry.summary
    if s is None or s.error:
        return None
    try:
        prediction = predict_summary(s, entry.file.path, gpus)
    except Exception:
        return None
    return prediction.to_json() if prediction is not None else None


def summary_fields(plan: MemoryPlan) -> dict[str, Any]:
    """What a plan-cache summary keeps so that a model list can show the speed without planning again."""
    from app.speed.learn import config_key, devices_key
    from planner.speed import token_cost

    cost = token_cost(plan).to_json()
    return {"speed_cost": cost, "speed_devices": devices_key(plan), "speed_config": config_key(plan)}


def predict_summary(summary: Any, path: str, gpus: list[Device], measure: bool = True) -> SpeedPrediction | None:
    """`file_speed` of a model list's row (a ModelSummary with summary_fields), or None without them."""
    from planner.speed import TokenCost

    data = getattr(summary, "speed_cost", None)
    if not data:
        return None
    try:
        cost = TokenCost.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None
    return file_speed(cost, path, summary.speed_devices, summary.speed_config, gpus, measure)


class _Loaded(Protocol):
    path: str

    @property
    def now(self) -> MemoryPlan: ...


class ReplySession(Protocol):
    """What a reply's lesson reads of the session (app.session.ModelSession)."""

    @property
    def model(self) -> _Loaded | None: ...

    @property
    def devices(self) -> DeviceReport | None: ...


def learn_from_reply(session: ReplySession, stats: GenerationStats) -> None:
    """Keep a finished reply's speed against its prediction (app/conversation/reply.py calls it). Never raises: a
    speed record is worth less than the reply it comes from."""
    try:
        _learn(session, stats)
    except Exception:  # a cache that cannot be written, a probe that fails: nothing learned
        return


def _learn(session: ReplySession, stats: GenerationStats) -> None:
    from app.speed.learn import keep_record, reply_record
    from planner.speed import token_cost

    model = session.model
    report = session.devices
    gpus = list(report.gpus) if report is not None else []
    if model is None or _what_if(gpus):
        return  # on a what-if card the engine runs on this machine, not on the card planned for
    plan = model.now
    generated = int(stats.generated_tokens)
    record = reply_record(
        model.path,
        plan,
        float(stats.tokens_per_second),
        float(stats.prompt_tokens_per_second),
        int(stats.prompt_tokens + generated // 2),  # the cells read while decoding, on average
        generated,
        int(stats.prompt_tokens - stats.reused_tokens),
        int(stats.reused_tokens),
    )
    if record is not None:
        keep_record(record, token_cost(plan))
