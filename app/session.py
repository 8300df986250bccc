"""The loaded model: engine, plan, chat format, telemetry. Driven from worker threads.

The app holds one session. `load` runs in a worker (it takes seconds): llama.cpp's dry
run confirms the plan, then the engine (a process of its own) loads it, at the start
size when the context grows with the conversation (`grow_for`, `shrink`). Replies run
in a worker too, through `app.conversation.reply.write_reply`. Only `stop()` is called from the UI
thread while a worker runs.

A load that fails for want of memory (the plan was wrong, another process took
memory, the driver refused) is retried with the planner's next, smaller plan
(`planner.retry`), up to MAX_RETRIES times; `reload_smaller` does the same after a
decode ran out of memory mid-chat. Anything else ends in `LoadFailed`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from app.conversation.outcome import CRASHED, ENGINE_CRASH, ReplyOutcome
from app.conversation.recovery import SMALLER, WITHOUT_EXTRA_BUFFERS, WITHOUT_LOST_SERVERS, Recovery, recovery_for
from app.conversation.templates import ChatFormat, choose_format
from app.devices import DeviceReport
from app.devices.learned_buffers import measured_of
from app.devices.learned_buffers import remember as remember_load
from app.devices.learned_overhead import (
    LoadLearning,
    after_failed_load,
    after_reply,
    buffers_now,
    learn_after_load,
)
from app.elastic_context import ElasticContext
from app.engine.crash import EngineCrashed, EngineExit
from app.engine.dry_run import DryRun
from app.engine.failure import Failure, classify
from app.engine.types import (
    EngineError,
    GenerationParams,
    GenerationStats,
    LoadReport,
    MediaPrompt,
    ProjectorLoad,
    Prompt,
    PromptWatcher,
    ResizeReport,
)
from app.engine.verify import Confirmed, Verification, confirm_plan
from app.errors import VramchatError
from app.planning import plan_again, plan_at_context, plan_config, plan_smaller, rules_for
from app.telemetry import Telemetry, for_engine
from app.telemetry.drift import OTHERS_CAUSE, DriftAlarm, DriftWatch
from app.telemetry.runway import TurnPace
from planner.config import LoadConfig
from planner.errors import PlannerError
from planner.fit import FitResult
from planner.hardware import Device, Host
from planner.memory import MemoryPlan
from planner.model import ModelAnatomy
from planner.projector import Projector
from planner.retry import MAX_RETRIES, Retry, describe_changes

if TYPE_CHECKING:
    from app.engine.types import MediaEncoded

RetryCallback = Callable[[Retry | None, str], None]  # None: the same plan, without CPU extra buffers


class EngineLike(Protocol):
    """What the app needs of an engine (app.engine.Engine, or a fake in fast UI tests)."""

    report: LoadReport | None
    last_stats: GenerationStats
    generating: threading.Event  # set while a reply runs

    @property
    def loaded(self) -> bool: ...

    def load(
        self,
        path: str,
        config: LoadConfig,
        progress: Callable[[float], bool | None] | None = None,
        projector: ProjectorLoad | None = None,
    ) -> LoadReport: ...
    def generate(
        self, prompt: Prompt, params: GenerationParams | None = None, progress: PromptWatcher | None = None
    ) -> Iterator[str]:
        """The reply's pieces as they come; `progress` is told how the prompt's reading goes, as the
        engine says it (nothing for a short prompt)."""
        ...

    def tokenize_media(self, prompt: MediaPrompt) -> list[int]:
        """The cells a prompt with images takes (the projector says how many tokens each image becomes)."""
        ...

    def stop(self) -> None: ...
    def unload(self) -> None: ...
    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]: ...
    def special_text(self, which: str) -> str: ...
    def kv_cells_used(self) -> int: ...
    def resize(self, n_ctx: int, keep: bool = True) -> ResizeReport: ...
    def dry_run(self, path: str, config: LoadConfig) -> DryRun | None:
        """llama.cpp's no_alloc dry run of `config`; None where the engine has none (a fake in UI tests)."""
        ...

    # seconds a reply may go without a word before the engine counts as lost (None: no limit)
    stall_timeout: float | None
    stall_on_rpc: bool  # a stall is blamed on an RPC server (the model uses one)
    # whether `resize` can change the context without a reload (the context grows with the chat)
    resizable: bool
    encoded: list[MediaEncoded]  # the images the projector encoded so far, in order

    @property
    def pid(self) -> int | None:
        """The process llama.cpp runs in (None: this one, or none yet)."""
        ...

    def exit_while_idle(self) -> EngineExit | None:
        """How the engine ended if it ended between requests with a model loaded (told once)."""
        ...


@dataclass
class LoadedModel:
    path: str
    anatomy: ModelAnatomy
    fit: FitResult
    report: LoadReport
    fmt: ChatFormat
    eos: str
    # what the load changed from the plan first chosen, when memory ran short (empty otherwise)
    changes: list[str] = field(default_factory=list)
    # llama.cpp's dry run of the plan that was loaded (None: the engine has no dry run)
    verification: Verification | None = None
    dry_run_message: str = ""  # one line when the dry run changed the plan
    # the plan at the context the engine holds now (the plan itself is for the maximum context)
    committed: MemoryPlan | None = None

    @property
    def plan(self) -> MemoryPlan:
        return self.fit.plan

    @property
    def n_ctx(self) -> int:
        """The context the engine holds now (committed)."""
        return self.report.n_ctx

    @property
    def max_ctx(self) -> int:
        """The context the plan reserves room for: the committed one grows up to it."""
        return self.plan.resolved.n_ctx

    @property
    def now(self) -> MemoryPlan:
        """The plan for what is allocated now."""
        return self.committed or self.plan

    @property
    def name(self) -> str:
        from app.terminal_text import terminal_safe

        return terminal_safe(self.anatomy.name or self.path.rsplit("/", 1)[-1])  # a label from the file

    @property
    def projector(self) -> Projector | None:
        """The vision projector loaded beside the model (None: text only)."""
        return self.plan.projector if self.report.projector is not None else None

    @property
    def marker(self) -> str:
        """The text that stands for an image in a prompt ('' when no projector is loaded)."""
        return self.report.projector.marker if self.report.projector is not None else ""

    @property
    def sees(self) -> bool:
        """Whether the model can be shown images."""
        return self.report.projector is not None and self.report.projector.vision

    @property
    def hears(self) -> bool:
        """Whether the model can be given sounds (a projector with an audio encoder)."""
        return self.report.projector is not None and self.report.projector.audio


@dataclass(frozen=True)
class Growth:
    """The context went from one size to another (or could not: `error` says why)."""

    before: int
    after: int
    seconds: float
    error: str = ""


class LoadFailed(VramchatError):
    """The model could not be loaded, even with the smaller plans tried; the message says why."""

    title = "The model did not load"

    def __init__(self, message: str, failure: Failure | None = None) -> None:
        super().__init__(message)
        self.failure = failure


def default_engine() -> EngineLike:
    """llama.cpp in its own process: a native crash ends that process, never the app."""
    from app.engine.process import EngineProcess

    return EngineProcess()


class ModelSession:
    def __init__(
        self, engine_factory: Callable[[], EngineLike] = default_engine, verify: bool = True, elastic: bool = True
    ) -> None:
        self._factory = engine_factory
        self.verify = verify  # ask llama.cpp's dry run before every load
        self._elastic = elastic  # start with a small context and grow it with the conversation
        self._devices: DeviceReport | None = None
        self._engine: EngineLike | None = None
        self.model: LoadedModel | None = None
        self.telemetry: Telemetry | None = None
        self.generating = threading.Event()
        self.learning: LoadLearning | None = None
        self.drift: DriftWatch | None = None
        self.on_drift: Callable[[DriftAlarm], None] | None = None  # the app's notification (sampler thread)
        self.on_drift_note: Callable[[str], None] | None = None  # what the watch cannot see on a device
        self.pace = TurnPace()  # tokens a turn adds to the context (the dashboard's runway)

    @property
    def engine(self) -> EngineLike:
        if self._engine is None:
            self._engine = self._factory()
        return self._engine

    def load(
        self,
        path: str,
        anatomy: ModelAnatomy,
        fit: FitResult,
        devices: DeviceReport,
        progress: Callable[[float], bool | None] | None = None,
        on_retry: RetryCallback | None = None,
        reprobe: Callable[[], DeviceReport] | None = None,
    ) -> LoadedModel:
        """Load the plan's configuration (worker thread); on a memory failure, the next smaller plan.

        `on_retry(retry, why)` is told before each retry; `reprobe()` reads the devices again,
        since another process may have taken memory since the plan was made.
        """
        from app.demo import DemoUnavailable, check_before_load

        try:
            check_before_load(path)  # the demo's weights against its sha256, once per file joined
        except DemoUnavailable as exc:
            raise LoadFailed(str(exc)) from None
        self.unload()
        engine = self.engine
        first = fit.plan
        if first.projector is not None:
            from planner.projectors.match import mismatch

            wrong = mismatch(first.projector, anatomy)
            if wrong:
                raise LoadFailed(f"{wrong}. {WITHOUT_PROJECTOR}")
        confirmed: Confirmed | None = None
        for attempt in range(MAX_RETRIES + 1):
            try:
                if self.verify:
                    confirmed = confirm_plan(
                        engine,
                        path,
                        fit.plan,
                        devices.gpus,
                        devices.host,  # type: ignore
                        functools.partial(_plan_again, anatomy, fit.plan),
                    )
                    if confirmed is not None:
                        fit = replace(fit, plan=confirmed.plan)
                # a stopped engine, a hung driver or a server that stops answering must not hang a reply
                engine.stall_timeout = _stall_limit(fit.plan, devices.gpus)
                engine.stall_on_rpc = any(d.backend == "rpc" for d in fit.plan.gpus if d.layers)
                report = engine.load(
                    path, self._load_config(fit.plan), progress=progress, projector=projector_load(fit.plan)
                )
                break
            except EngineError as exc:
                if str(exc).startswith(PROJECTOR_FAILED):
                    raise LoadFailed(f"{exc}. {WITHOUT_PROJECTOR}") from None
                if (
                    isinstance(exc, EngineCrashed)
                    and exc.exit.cpu_extra_buffer
                    and attempt < MAX_RETRIES
                    and fit.plan.config.cpu_extra_buffers is not False
                ):
                    if on_retry is not None:
                        on_retry(None, f"{exc} Loading again without the CPU's extra buffer types.")
                    fit = with_extra_buffers(anatomy, fit, devices, False)
                    continue
                failure = classify(str(exc), exc.log, [g.name for g in devices.gpus], exc.status)
                if failure.memory:  # the GPUs that refused took more than planned: the next plan counts it
                    after_failed_load(fit.plan, devices.gpus, failure.devices)
                if not failure.memory or attempt == MAX_RETRIES:
                    tried = f" (after {attempt} smaller plan{'s' if attempt > 1 else ''})" if attempt else ""
                    raise LoadFailed(f"{exc}{tried}", failure) from None
                devices = _reprobed(devices, reprobe)
                fit = self._smaller(anatomy, fit.plan, devices, failure, exc, on_retry)
        fmt = choose_format(anatomy.metadata, anatomy.architecture, path.rsplit("/", 1)[-1])
        changes = describe_changes(first, fit.plan) if fit.plan.config != first.config else []
        self.model = LoadedModel(
            path,
            anatomy,
            fit,
            report,
            fmt,
            engine.special_text("eos"),
            changes,
            confirmed.verification if confirmed else None,
            confirmed.message if confirmed else "",
            plan_at_context(fit.plan, report.n_ctx, devices.gpus, devices.host),
        )
        self._devices = devices
        # where the load allocated more than the rules say (the dry run may have seen it, a plain plan does not),
        # later plans of this model, devices and configuration count it
        try:
            rules = self.model.now  # the rules' own figures, unless the dry run replaced some of them
            if confirmed is not None and not confirmed.verification.verified:
                rules = rules_for(anatomy, rules.config, devices.gpus, devices.host, fit.plan.projector)
            remember_load(rules, measured_of(report.measurements.tables(), [g.name for g in devices.gpus]))
        except PlannerError:  # the rules cannot price what loaded (an estimate's architecture): nothing to learn
            pass
        self.pace.reset()
        self.telemetry = for_engine(engine, devices, fit.plan, speed=self._speed, plan_now=self._plan_now)
        # what the GPUs hold beyond the buffers: learned for the next plan, and watched while the model runs
        self.learning = learn_after_load(self.model, devices.gpus, engine.pid)
        self.drift = DriftWatch(
            devices.gpus, self._plan_now, self._drifted, self._drift_alarm, on_note=self._drift_note
        )
        self.telemetry.observers.append(self.drift.check)
        self.telemetry.start()
        return self.model

    def reply_finished(self) -> None:
        """A reply ended well (worker thread): the first of a load shows the runtime's growth."""
        after_reply(self.learning, self.model)

    def _plan_now(self) -> MemoryPlan | None:
        """The plan for what the engine holds now (the telemetry's simulated devices follow it)."""
        return self.model.now if self.model is not None else None

    def _drifted(self, name: str, used: int, total: int) -> tuple[bool, str | None]:
        learning, model = self.learning, self.model
        if learning is None or model is None:
            return False, None
        learning.buffers = buffers_now(model, learning.devices)  # the context may have grown since the load
        drift = learning.drifted(name, used, total)
        return drift.raised, OTHERS_CAUSE if drift.others else None

    def _drift_alarm(self, alarm: DriftAlarm) -> None:
        if self.on_drift is not None:
            self.on_drift(alarm)

    def _drift_note(self, note: str) -> None:
        if self.on_drift_note is not None:
            self.on_drift_note(note)

    # -- a context that grows with the conversation ---------------------------------------------------

    @property
    def context(self) -> ElasticContext:
        """The growing context's policy: the setting, where the engine can resize."""
        return ElasticContext(self._elastic and self.engine.resizable)

    @property
    def elastic(self) -> bool:
        return self.context.enabled

    def _load_config(self, plan: MemoryPlan) -> LoadConfig:
        """The plan's configuration, at the start size when the context grows with the conversation."""
        return plan.config.with_(n_ctx=self.context.load_size(plan))

    def grow_for(self, needed: int) -> Growth | None:
        """Make the context hold `needed` tokens (the prompt and room for the reply), up to the plan's
        maximum; None when it already does. A growth that cannot get memory keeps the size it had."""
        model = self.model
        if model is None:
            return None
        target = self.context.next(model.n_ctx, needed, model.max_ctx)
        if target is None:
            return None
        before = model.n_ctx
        try:
            resized = self.engine.resize(target)
        except EngineError as exc:
            self._resized()
            return Growth(before, model.n_ctx, 0.0, str(exc))
        self._resized()
        return Growth(before, resized.n_ctx, resized.seconds)

    def shrink(self) -> Growth | None:
        """A new chat: give memory back, down to the start size (the conversation is not kept)."""
        model = self.model
        if model is None:
            return None
        target = self.context.reset_size(model.n_ctx, model.max_ctx)
        if target is None:
            return None
        before = model.n_ctx
        resized = self.engine.resize(target, keep=False)
        self.pace.reset()
        self._resized()
        return Growth(before, resized.n_ctx, resized.seconds)

    def _resized(self) -> None:
        model = self.model
        report = self.engine.report
        if model is None or report is None:
            return
        model.report = report
        devices = self._devices
        if devices is not None:
            model.committed = plan_at_context(model.plan, report.n_ctx, devices.gpus, devices.host)
        if self.telemetry is not None:
            m = report.measurements
            self.telemetry.set_allocation(sum(m.kv.values()) + sum(m.kv_swa.values()), m.compute)

    def reload_smaller(
        self,
        error: EngineError,
        devices: DeviceReport,
        progress: Callable[[float], bool | None] | None = None,
        on_retry: RetryCallback | None = None,
        reprobe: Callable[[], DeviceReport] | None = None,
    ) -> LoadedModel:
        """After a decode ran out of memory: load the same model again with the next smaller plan."""
        model = self.model
        if model is None:
            raise LoadFailed("no model is loaded")
        failure = classify(str(error), error.log, [g.name for g in devices.gpus], error.status)
        self.unload()
        devices = _reprobed(devices, reprobe)
        fit = self._smaller(model.anatomy, model.plan, devices, failure, error, on_retry)
        loaded = self.load(model.path, model.anatomy, fit, devices, progress, on_retry, reprobe)
        loaded.changes = describe_changes(model.plan, loaded.plan)
        return loaded

    def reload_without_lost_servers(
        self,
        reprobe: Callable[[], DeviceReport],
        progress: Callable[[float], bool | None] | None = None,
        on_retry: RetryCallback | None = None,
    ) -> tuple[LoadedModel, list[str]]:
        """An RPC server stopped answering mid-reply (the engine aborted): leave out the servers that
        no longer answer, plan again for the devices left, load. Returns the model and the servers
        left out."""
        from app.rpc.client import drop_unanswering

        model = self.model
        if model is None:
            raise LoadFailed("no model is loaded")
        lost = [str(e) for e in drop_unanswering()]
        self.unload()
        devices = reprobe()
        fit = plan_again(model.anatomy, model.plan, devices.gpus, devices.host)
        if not fit.plan.fits:
            where = ", ".join(lost) or "the RPC server"
            raise LoadFailed(f"Without {where} the model no longer fits: {fit.reasons[0]}")
        loaded = self.load(model.path, model.anatomy, fit, devices, progress, on_retry, reprobe)
        return loaded, lost  # a plan for other devices, not a smaller one: the app says what was left out

    # -- after a failed reply ------------------------------------------------------------------------

    def recover(self, outcome: ReplyOutcome) -> Recovery | None:
        """What a failed reply calls for (app.conversation.recovery); None when the model is loaded and well."""
        if self.model is None:
            return None
        return recovery_for(outcome, self.model.plan)

    def carry_out(
        self,
        recovery: Recovery,
        reprobe: Callable[[], DeviceReport],
        progress: Callable[[float], bool | None] | None = None,
        on_retry: RetryCallback | None = None,
    ) -> tuple[LoadedModel, list[str]]:
        """Do what `recovery` says (worker thread). Returns the model loaded and the RPC servers left
        out (empty unless servers were lost); raises LoadFailed when no plan loads."""
        model, devices = self.model, self._devices
        if model is None or devices is None:
            raise LoadFailed("no model is loaded")
        if recovery.action == SMALLER:
            return self.reload_smaller(recovery.error, devices, progress, on_retry, reprobe), []
        if recovery.action == WITHOUT_LOST_SERVERS:
            return self.reload_without_lost_servers(reprobe, progress, on_retry)
        fit = model.fit
        if recovery.action == WITHOUT_EXTRA_BUFFERS:
            fit = with_extra_buffers(model.anatomy, fit, devices, False)
        return self.load(model.path, model.anatomy, fit, devices, progress, on_retry, reprobe), []

    def engine_lost(self) -> ReplyOutcome | None:
        """The engine ended while idle (killed, crashed): the outcome to recover from, as if a reply
        had been cut short by it; None while it lives. The watchdog in the chat asks every second."""
        if self.model is None or self.generating.is_set():
            return None
        ended = self.engine.exit_while_idle()
        if ended is None:
            return None
        crash = EngineCrashed(ended)
        return ReplyOutcome(CRASHED, "", GenerationStats(stopped_by=ENGINE_CRASH), str(crash), crash)

    @property
    def devices(self) -> DeviceReport | None:
        """The devices the loaded model was planned for (probed again after a failure)."""
        return self._devices

    @property
    def gpu_names(self) -> list[str]:
        """The names of the GPUs the loaded model was planned for, as llama.cpp names their memory pools."""
        return [g.name for g in self._devices.gpus] if self._devices is not None else []

    @staticmethod
    def _smaller(
        anatomy: ModelAnatomy,
        failed: MemoryPlan,
        devices: DeviceReport,
        failure: Failure,
        error: Exception,
        on_retry: RetryCallback | None,
    ) -> FitResult:
        retry = plan_smaller(anatomy, failed, devices.gpus, devices.host, set(failure.devices) or None)
        if retry is None:
            raise LoadFailed(f"{error}. No smaller plan fits in the memory that is free now.", failure)
        if on_retry is not None:
            on_retry(retry, str(error))
        return retry.result

    def _speed(self) -> tuple[float, bool]:
        engine = self._engine
        if engine is None:
            return 0.0, False
        generating = self.generating.is_set()
        # while idle the graph drops to zero; the dashboard keeps the last reply's speed in words
        return (engine.last_stats.live_tokens_per_second() if generating else 0.0), generating

    def stop(self) -> None:
        if self._engine is not None:
            self._engine.stop()

    def unload(self) -> None:
        if self.telemetry is not None:
            self.telemetry.stop()
            self.telemetry = None
        self.learning = self.drift = None
        if self._engine is not None and self.model is not None:
            self._engine.unload()
        self.model = None

    def close(self) -> None:
        self.stop()
        self.unload()


def with_extra_buffers(anatomy: ModelAnatomy, fit: FitResult, devices: DeviceReport, value: bool) -> FitResult:
    """The same plan with the CPU's extra buffer types on or off (after a crash in their kernels)."""
    config = fit.plan.config.with_(cpu_extra_buffers=value)
    return plan_config(anatomy, config, devices.gpus, devices.host, fit.plan.projector)


def _plan_again(anatomy: ModelAnatomy, plan: MemoryPlan, gpus: list[Device], host: Host) -> MemoryPlan | None:
    """The solver again for llama.cpp's dry run, on devices with what it needs more taken off (None: nothing fits)."""
    fit = plan_again(anatomy, plan, gpus, host)
    return fit.plan if fit.plan.fits else None


# what the engine's message begins with when libmtmd refused the projector, and what the user can do
PROJECTOR_FAILED = "could not load the projector"
WITHOUT_PROJECTOR = "Load the model without it (the picker's Vision setting off; without --mmproj on the command line)"


def projector_load(plan: MemoryPlan) -> ProjectorLoad | None:
    """The projector as the plan placed it: on the first GPU when the plan put its buffers there."""
    p = plan.projector
    if p is None:
        return None
    on_gpu = any(b.kind == "projector_weights" and b.device != "CPU" for b in plan.buffers)
    return ProjectorLoad(p.path, on_gpu, plan.config.flash_attn, p.image_max_tokens)


def _reprobed(devices: DeviceReport, reprobe: Callable[[], DeviceReport] | None) -> DeviceReport:
    if reprobe is None:
        return devices
    try:
        return reprobe()
    except Exception:  # a probe that fails now: plan with what was known
        return devices


def _stall_limit(plan: MemoryPlan, gpus: list[Device]) -> float:
    """app.engine.stall's limit for this plan, from its predicted speed (no probe: what is known now)."""
    from app.engine.stall import stall_limit
    from app.speed import predict_plan

    try:
        speed = predict_plan(plan, gpus, measure=False)
    except Exception:  # a prediction that fails leaves the generous default
        return stall_limit(None, None, plan.config.n_batch)
    return stall_limit(
        speed.decode_full.low or speed.decode_full.value, speed.prefill.low or speed.prefill.value, plan.config.n_batch
    )
