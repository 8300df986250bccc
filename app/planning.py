"""The one way into planning (`plan_source`), and what hand-set knobs mean (`plan_model`).

Every place that plans a model (the command line's --plan, -p and --quants, the picker, the hub,
the model list, the estimate check) goes through `plan_source`: the model read by one route, a
projector chosen for it, the plan made for devices probed once by the caller, the speed on asking.

The rule: knobs that place the model (GPU layers, experts kept on the CPU, the V cache type,
batch sizes, parallel sequences, a full-size sliding-window cache) fix the configuration, which is
priced exactly as given; the context, the K cache type and flash attention are wishes the solver
honours while it chooses the rest. A fixed configuration without a context gets the longest one
that fits it (up to the context the solver would aim for), so that "10 GPU layers" answers with a
context that goes with 10 layers rather than with the solver's own choice of layers.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from planner.errors import ConfigError

if TYPE_CHECKING:  # the solver is imported when a plan is made, not when the picker is drawn
    from collections.abc import Callable

    from app.sources.model import ModelSource
    from planner.config import LoadConfig
    from planner.fit import FitResult
    from planner.hardware import Device, Host
    from planner.memory import MemoryPlan
    from planner.model import ModelAnatomy
    from planner.projector import Projector
    from planner.retry import Retry
    from planner.speed import SpeedPrediction

    # how a projector is chosen for a model once it is read: (the projector, or None and why not)
    ProjectorRule = Callable[[ModelAnatomy], tuple[Projector | None, str]]

# The longest context anyone may ask for: beyond any model's, so a typo is caught, not planned.
MAX_CONTEXT = 10_000_000
KV_CHOICES = ("auto", "f16", "q8_0", "q4_0")
FA_CHOICES = ("auto", "on", "off")


@dataclass(frozen=True)
class PlanChoice:
    """What the user set by hand; None (or "auto") leaves a knob to the solver."""

    n_ctx: int | None = None
    kv: str = "auto"  # the K cache type (V follows it with flash attention, as llama.cpp allows)
    n_gpu_layers: int | None = None
    flash_attn: str = "auto"  # auto, on, off
    type_v: str | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    swa_full: bool | None = None
    n_seq_max: int | None = None
    n_cpu_moe: int | None = None
    cpu_extra_buffers: bool | None = None  # None: this CPU's default (planner.weights)
    # --min-speed: the decode speed (tok/s at the start of a chat) the solver should reach (app.speed)
    min_speed: float | None = None
    margin: int | None = None  # memory kept free on every GPU (--margin); None: the planner's default
    margins: dict[str, int] = field(default_factory=dict, hash=False, compare=False)  # per GPU, over `margin`
    projector: Projector | None = field(default=None, hash=False, compare=False)

    def margins_for(self, gpus: list[Device]) -> dict[str, int]:
        """The memory kept free on each of `gpus`: the one given per GPU, else `margin` on every one."""
        if self.margin is None:
            return dict(self.margins)
        return {g.name: self.margins.get(g.name, self.margin) for g in gpus}

    @property
    def is_default(self) -> bool:
        return self == PlanChoice()

    @property
    def fixed(self) -> bool:
        """Whether a knob that places the model was set: the configuration is priced as given."""
        placement = (self.n_gpu_layers, self.type_v, self.n_batch, self.n_ubatch, self.swa_full, self.n_seq_max)
        return any(v is not None for v in placement) or bool(self.n_cpu_moe)


ALL_LAYERS_WORD = "all"  # the GPU layers field's word for every layer (--ngl -1)


def parse_choice(ctx: str, kv: str, ngl: str, fa: str) -> PlanChoice:
    """The picker's fields as a choice; raises ConfigError with a readable reason."""

    def number(text: str, what: str) -> int | None:
        text = text.strip().replace(",", "").replace("_", "")
        if not text or text.lower() == "auto":
            return None
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{what}: {text!r} is not a whole number") from None

    n_ctx = number(ctx, "context")
    if n_ctx is not None and not 256 <= n_ctx <= MAX_CONTEXT:
        raise ConfigError(f"context must be between 256 and {MAX_CONTEXT:,} tokens")
    every = ngl.strip().lower() in (ALL_LAYERS_WORD, "-1")
    n_gpu_layers = -1 if every else number(ngl, "GPU layers")
    if n_gpu_layers is not None and n_gpu_layers < -1:
        raise ConfigError("GPU layers cannot be negative (all: every layer)")
    from planner.ggml_types import KV_CACHE_TYPES

    if kv != "auto" and kv not in KV_CACHE_TYPES:
        raise ConfigError(f"unknown KV cache type {kv!r}")
    if fa not in FA_CHOICES:
        raise ConfigError(f"flash attention is auto, on or off, not {fa!r}")
    return PlanChoice(n_ctx, kv, n_gpu_layers, fa)


def choice_fields(choice: PlanChoice) -> tuple[str, str, str, str]:
    """The picker's four fields (context, K type, GPU layers, flash attention) showing `choice`, as
    `parse_choice` reads them back."""
    ngl = choice.n_gpu_layers
    return (
        "" if choice.n_ctx is None else str(choice.n_ctx),
        choice.kv,
        "" if ngl is None else (ALL_LAYERS_WORD if ngl < 0 else str(ngl)),
        choice.flash_attn,
    )


def with_fields(carried: PlanChoice, fields: PlanChoice) -> PlanChoice:
    """`carried` (the command line's whole choice) with the four knobs the picker's fields hold, as set now."""
    return dataclasses.replace(
        carried,
        n_ctx=fields.n_ctx,
        kv=fields.kv,
        n_gpu_layers=fields.n_gpu_layers,
        flash_attn=fields.flash_attn,
    )


def beyond_fields(choice: PlanChoice) -> list[str]:
    """The knobs of `choice` the picker has no field for, in words ("V q8_0", "ubatch 128")."""
    from planner.units import format_size

    words = []
    if choice.type_v is not None:
        words.append(f"V {choice.type_v}")
    if choice.n_batch is not None:
        words.append(f"batch {choice.n_batch}")
    if choice.n_ubatch is not None:
        words.append(f"ubatch {choice.n_ubatch}")
    if choice.swa_full is not None:
        words.append(f"full-size window cache {'on' if choice.swa_full else 'off'}")
    if choice.n_seq_max is not None:
        words.append(f"{choice.n_seq_max} parallel sequence{'s' if choice.n_seq_max != 1 else ''}")
    if choice.n_cpu_moe:
        words.append(f"experts of {choice.n_cpu_moe} layer{'s' if choice.n_cpu_moe != 1 else ''} on the CPU")
    if choice.cpu_extra_buffers is not None:
        words.append(f"CPU extra buffers {'on' if choice.cpu_extra_buffers else 'off'}")
    if choice.min_speed is not None:
        words.append(f"at least {choice.min_speed:g} tok/s")
    if choice.margin is not None:
        words.append(f"{format_size(choice.margin)} kept free on each GPU")
    return words


def check_choice(model: ModelAnatomy, choice: PlanChoice) -> None:
    """ConfigError for knobs llama.cpp refuses together (a quantized V cache without flash attention, say),
    known from the model alone, before any device is asked."""
    from planner.config import resolve

    if choice.fixed:
        resolve(model, _fixed(model, [], choice, choice.n_ctx or 4096))


def plan_model(model: ModelAnatomy, gpus: list[Device], host: Host, choice: PlanChoice) -> FitResult:
    """Solve for the knobs left blank, or price a fixed configuration; ConfigError for what llama.cpp
    refuses (quantized V without flash attention, say)."""
    from planner.fit import Wishes, evaluate, solve

    gpus = _placed(model, gpus)  # which of the model's ops each device runs, as it answers
    if not choice.fixed:
        kv_types = (choice.kv,) if choice.kv != "auto" else Wishes().kv_types
        wishes = Wishes(
            n_ctx=choice.n_ctx,
            kv_types=kv_types,
            flash_attn=choice.flash_attn,
            margins=choice.margins_for(gpus),
            projector=choice.projector,
            cpu_extra_buffers=choice.cpu_extra_buffers,
            min_speed=choice.min_speed,
            decode_speed=_decode_speed(gpus) if choice.min_speed else None,
        )
        return solve(model, gpus, host, wishes)
    n_ctx = choice.n_ctx if choice.n_ctx is not None else _longest_fixed_context(model, gpus, host, choice)
    margins = choice.margins_for(gpus)
    return evaluate(model, _fixed(model, gpus, choice, n_ctx), gpus, host, margins, choice.projector)


def _decode_speed(gpus: list[Device]) -> Callable[[MemoryPlan], float | None]:
    from app.speed import decode_speed_for

    return decode_speed_for(gpus)


def _fixed(model: ModelAnatomy, gpus: list[Device], choice: PlanChoice, n_ctx: int | None):  # -> LoadConfig
    from planner.fit import fixed_config

    ngl = choice.n_gpu_layers
    return fixed_config(
        model,
        gpus,
        n_gpu_layers=ngl if ngl is None or ngl >= 0 else model.n_layer + 1,
        n_ctx=n_ctx,
        type_k=None if choice.kv == "auto" else choice.kv,
        type_v=choice.type_v,
        flash_attn=None if choice.flash_attn == "auto" else choice.flash_attn == "on",
        n_batch=choice.n_batch,
        n_ubatch=choice.n_ubatch,
        swa_full=choice.swa_full,
        n_seq_max=choice.n_seq_max,
        n_cpu_moe=choice.n_cpu_moe,
        cpu_extra_buffers=choice.cpu_extra_buffers,
    )


def _longest_fixed_context(model: ModelAnatomy, gpus: list[Device], host: Host, choice: PlanChoice) -> int:
    """The longest context (a multiple of llama.cpp's padding, up to the one the solver aims for) at
    which the fixed configuration fits; the context aimed for when none does (the plan says no)."""
    from planner.config import CTX_PAD
    from planner.fit import SMALLEST_CONTEXT, Wishes, desired_context
    from planner.memory import plan_memory
    from planner.units import round_up

    def fits(n_ctx: int) -> bool:
        config = _fixed(model, gpus, choice, n_ctx)
        return plan_memory(model, config, gpus, host, choice.margins_for(gpus), projector=choice.projector).fits

    want = round_up(desired_context(model, Wishes()), CTX_PAD)
    if fits(want):
        return want
    lo = round_up(SMALLEST_CONTEXT, CTX_PAD)
    if not fits(lo):
        return want
    hi = want  # lo fits, hi does not
    while hi - lo > CTX_PAD:
        mid = round_up((lo + hi) // 2, CTX_PAD)
        if mid >= hi:
            mid = hi - CTX_PAD
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


# -- the one way in ------------------------------------------------------------------------------------


class Devices(Protocol):
    """What a plan is made for: a device report (app.devices), probed once per command or screen."""

    @property
    def gpus(self) -> list[Device]: ...

    @property
    def host(self) -> Host: ...


@dataclass(frozen=True)
class Machine:
    """Devices known without a report of their own (a catalog holds its GPUs and host)."""

    gpus: list[Device]
    host: Host


@dataclass(frozen=True)
class Planned:
    """One model planned for one set of devices: what the command line, the picker and the hub show."""

    anatomy: ModelAnatomy
    fit: FitResult
    devices: Devices
    projector: Projector | None = None  # planned beside the model: its share is among the plan's buffers
    projector_note: str = ""  # why the projector offered is not planned with it

    @cached_property
    def speed(self) -> SpeedPrediction:
        """The predicted speed on these devices, worked out when first asked (it may time this CPU once);
        a failure is an unknown figure with its reason, never a failed plan."""
        from app.speed import plan_speed

        return plan_speed(self.fit.plan, self.devices.gpus)


def plan_source(
    source: str | ModelSource,
    devices: Devices,
    choice: PlanChoice,
    *,
    anatomy: ModelAnatomy | None = None,
    projector: ProjectorRule | None = None,
    known: FitResult | None = None,
) -> Planned:
    """Plan `source` (a file, a hub or URL reference, a listed model) for `devices` as `choice` asks.

    `anatomy`: the model already read (a list's parallel reads, the picker's own); `projector`: how
    to choose the projector planned beside it; `known`: a plan already made for this choice without a
    projector (the one llama.cpp's dry run checked), kept rather than made again where none is chosen.
    Raises PlannerError (ConfigError for knobs llama.cpp refuses together)."""
    model = anatomy if anatomy is not None else read_anatomy(source)
    note = ""
    if projector is not None:
        found, note = projector(model)
        if found is not None:
            choice = dataclasses.replace(choice, projector=found)
    if known is not None and choice.projector is None:  # a checked plan has no projector: kept without one
        fit = known
    else:
        fit = plan_model(model, devices.gpus, devices.host, choice)
    return Planned(model, _with_lessons(fit), devices, choice.projector, note)


# -- re-plans: every plan after the first goes through this door too ----------------------------------------
#
# A load that fails for memory, llama.cpp's dry run that needs more, an RPC server lost, a crash in the CPU's
# extra buffer types and the context's growth each plan again. Each re-plan here places the model's ops where
# each device runs them and counts what earlier loads taught (app.devices.learned_buffers), as the first plan
# did: a second plan that forgot them could repeat the first one's mistake. Nothing else in the app calls
# the solver (tests/app/test_one_door.py).


def _placed(model: ModelAnatomy, gpus: list[Device]) -> list[Device]:
    """`gpus` with the ops of `model` each runs, as ggml answers for it."""
    from app.devices.op_table import with_op_support

    return with_op_support(model, gpus)


def plan_again(model: ModelAnatomy, plan: MemoryPlan, gpus: list[Device], host: Host) -> FitResult:
    """The solver again with the wishes behind `plan` on these devices (llama.cpp's dry run took memory off
    them, or an RPC server is gone)."""
    from planner.fit import solve
    from planner.retry import wishes_for

    return _with_lessons(solve(model, _placed(model, gpus), host, wishes_for(plan)))


def plan_smaller(
    model: ModelAnatomy, failed: MemoryPlan, gpus: list[Device], host: Host, failed_devices: set[str] | None
) -> Retry | None:
    """The next smaller plan after `failed` could not be allocated (planner.retry), or None when none fits."""
    from planner.retry import safer_plan

    retry = safer_plan(model, failed, _placed(model, gpus), host, failed_devices=failed_devices)
    return None if retry is None else dataclasses.replace(retry, result=_with_lessons(retry.result))


def plan_config(
    model: ModelAnatomy, config: LoadConfig, gpus: list[Device], host: Host, projector: Projector | None
) -> FitResult:
    """`config` priced as it is (the same plan without the CPU's extra buffer types, a load's figures)."""
    from planner.fit import evaluate

    return _with_lessons(evaluate(model, config, _placed(model, gpus), host, projector=projector))


def rules_for(
    model: ModelAnatomy, config: LoadConfig, gpus: list[Device], host: Host, projector: Projector | None
) -> MemoryPlan:
    """The rules' own figures for `config`, without what loads taught: what a load is compared with to learn."""
    from planner.memory import plan_memory

    return plan_memory(model, config, _placed(model, gpus), host, projector=projector)


def plan_at_context(plan: MemoryPlan, n_ctx: int, gpus: list[Device], host: Host) -> MemoryPlan:
    """`plan` at a smaller context: what a load that starts there (or a context grown to it) commits."""
    from planner.elastic import committed_plan

    at = committed_plan(plan, n_ctx, _placed(plan.model, gpus), host)
    return at if at is plan else _with_lessons_plan(at)


def _with_lessons_plan(plan: MemoryPlan) -> MemoryPlan:
    from app.devices.learned_buffers import with_lessons

    return with_lessons(plan)


def _with_lessons(fit: FitResult) -> FitResult:
    """The fit with what an earlier load of the same model, devices and configuration allocated beyond the
    plan (app.devices.learned_buffers): the truth decides."""
    from app.devices.learned_buffers import with_lessons

    plan = with_lessons(fit.plan)
    return fit if plan is fit.plan else dataclasses.replace(fit, plan=plan)


def read_anatomy(source: str | ModelSource) -> ModelAnatomy:
    """The model's anatomy, by one route: a file's from the header cache, a listed model's or a hub or
    URL reference's by range reads of its header (app.sources, which keeps what it read)."""
    if not isinstance(source, str):
        from app import sources

        return sources.load_anatomy(source)
    if not os.path.exists(source):
        from app import sources
        from app.sources.refs import is_remote

        if is_remote(source):
            return sources.load_anatomy(sources.resolve_source(source))
    from app.caches.headers import load_anatomy_cached  # a file here: app.sources is not imported

    return load_anatomy_cached(source)


def projector_among(candidates: list[str], image_max_tokens: int | None = None) -> ProjectorRule:
    """The picker's rule: the candidate that fits the model, or none and a note that says why (the
    model is then planned to read words only); `image_max_tokens` caps the largest image planned for."""

    def choose(model: ModelAnatomy) -> tuple[Projector | None, str]:
        from app.vision import choose_projector
        from planner.projectors.match import mismatch

        found = choose_projector(candidates, model, image_max_tokens)
        if found is None:
            return None, "It cannot be read, so it is not loaded: the model reads words only."
        wrong = mismatch(found, model)
        if wrong:
            return None, f"{wrong}, so it is not loaded: the model reads words only."
        return found, ""

    return choose
