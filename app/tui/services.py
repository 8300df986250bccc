"""What the screens share, handed to each when it is made: the settings, the chat store, the plan
cache, the devices, the model session, and the few services around them (probing, the demo model).

The app owns one `Services`; screens reach it as `self.services`, typed, instead of reaching into
the app object (which would tie every screen to the app module and the app module to every screen).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app.caches.plans import PlanCache
from app.conversation.sampling import ChatSampling
from app.planning import PlanChoice
from app.settings import Settings, load_settings, save_settings
from app.store import Store
from app.store.salvage import open_store

if TYPE_CHECKING:
    from textual.worker import Worker

    from app.devices import DeviceReport
    from app.engine.verify import DryRunner
    from app.session import EngineLike, ModelSession
    from app.telemetry.drift import DriftAlarm
    from planner.model import ModelAnatomy

Notify = Callable[[str, str, str], None]  # (message, severity, title), safe to call from any thread


@dataclass
class AppOptions:
    model: str | None = None  # open this model: plan it, load it when it fits
    models_dirs: list[str] = field(default_factory=list)
    vram: str | None = None
    ram: str | None = None
    cpu: bool = False
    gpu: list[str] = field(default_factory=list)  # cards to plan for instead of this machine's (--gpu)
    include_demo: bool = True
    engine_factory: Callable[[], EngineLike] | None = None  # None: llama.cpp in an engine process
    store_path: Path | None = None
    continue_chat: bool = False  # open the last chat with its model (`--continue`, the continue_last_chat setting)
    # the command line's plan knobs, one choice as --plan and -p read it: the picker plans MODEL with it (its
    # fields show context, K type, GPU layers and flash attention; the rest are said beside them)
    choice: PlanChoice = field(default_factory=lambda: PlanChoice())
    anatomy: ModelAnatomy | None = None  # MODEL as the command line read it (its header read once)
    mmproj: str | None = None  # --mmproj: the projector MODEL loads with
    image_max_tokens: int | None = None  # --image-max-tokens: the largest image the projector is planned for
    elastic: bool | None = None  # --elastic: the context grows with the conversation (None: the setting)
    sampling: ChatSampling = field(default_factory=lambda: ChatSampling())  # --temp, --top-p ...: new chats'


def probe_for(options: AppOptions) -> DeviceReport:
    """The devices `options` ask for: this machine's, or simulated ones (--vram, --ram, --cpu, --gpu)."""
    from app.devices import probe_devices  # the probes' modules load in the scan worker, not before the picker

    return probe_devices(options.vram, options.ram, cpu_only=options.cpu, gpu=options.gpu)


class Services:
    def __init__(self, options: AppOptions, settings: Settings | None, notify: Notify) -> None:
        self.options = options
        self._notify = notify
        warning = None
        if settings is None:
            settings, warning = load_settings()
        self.settings = settings
        self.startup_warnings = [warning] if warning else []
        self.devices: DeviceReport | None = None  # the picker's probe, set on the UI thread
        self._session: ModelSession | None = None  # made on first use: the picker is drawn without it
        self._demo_assembly: Future[Path | None] | None = None
        self.plan_cache = PlanCache()
        if self.plan_cache.load_error:
            self.startup_warnings.append(self.plan_cache.load_error)
        store, notes = open_store(options.store_path)
        self.store: Store = store
        self.startup_warnings += notes

    @property
    def session(self) -> ModelSession:
        """The model session (engine, telemetry, the loaded model); its modules, the engine's and the
        whole planner's, are imported when it is first needed, not before the picker is drawn."""
        if self._session is None:
            from app.session import ModelSession, default_engine

            self._session = ModelSession(
                self.options.engine_factory or default_engine,
                elastic=self.settings.elastic_context if self.options.elastic is None else self.options.elastic,
            )
            self._session.on_drift = self._drift_alarm
            self._session.on_drift_note = lambda note: self._notify(note, "information", "Memory drift")
        return self._session

    def _drift_alarm(self, alarm: DriftAlarm) -> None:
        """A GPU holds more than planned (told once per device and load, from the telemetry's thread)."""
        self._notify(alarm.line, "warning", "Memory drift")

    @property
    def session_started(self) -> bool:
        return self._session is not None

    def started_session(self) -> ModelSession | None:
        """The session if one was made (for views that draw it, and must not start one)."""
        return self._session

    def save_settings(self) -> None:
        try:
            save_settings(self.settings)
        except OSError as exc:
            self._notify(f"Could not save the settings: {exc}", "error", "")

    def report_worker_error(self, worker: Worker[object]) -> None:
        """A worker that failed unexpectedly is reported, never left silent (nor a traceback)."""
        from app.errors import describe

        title, text = describe(worker.error)
        self._notify(text, "error", f"{title} ({worker.group})")

    def dry_runner(self) -> tuple[DryRunner, Callable[[], None]]:
        """An engine process for the picker's checks of estimated plans, apart from the session's (a
        dry run there would share a process with a loaded model), and how to end it. A test's engine
        factory stands in for it (a fake has no dry run: its checks change nothing)."""
        if self.options.engine_factory is not None:
            return self.options.engine_factory(), lambda: None
        from app.engine.process import EngineProcess

        engine = EngineProcess()
        return engine, engine.close

    def probe_devices(self) -> DeviceReport:
        """Probe (or simulate) the devices; called from the scan worker, which posts the report (the
        picker stores it in `devices` on the UI thread)."""
        from app.tui import early_probe

        begun = early_probe.take()  # the first: begun as the app started
        return begun.result() if begun is not None else probe_for(self.options)

    def assembled_demo(self) -> tuple[Path | None, bool]:
        """The demo model's file when it is ready, and whether it still has to be assembled (the
        package is installed, the file not yet written): a first start's few seconds of work."""
        if not self.options.include_demo:
            return None, False
        from app.demo import DemoUnavailable, demo_installed, demo_model_path

        if not demo_installed():
            return None, False
        try:
            return demo_model_path(assemble=False), False
        except DemoUnavailable:
            return None, True

    def demo_assembly(self) -> Future[Path | None]:
        """The demo model being assembled in a thread of its own, started on the first call (a
        rescan meanwhile waits for the same one). Its result is None, with a notification, when
        it failed. The thread is a daemon: quitting does not wait for it, and the hidden partial
        file it leaves is written again next time."""
        if self._demo_assembly is None:
            future: Future[Path | None] = Future()
            self._demo_assembly = future

            def assemble() -> None:
                from app.demo import DemoUnavailable, demo_model_path

                try:
                    future.set_result(demo_model_path())
                except DemoUnavailable as exc:
                    self._notify(str(exc), "error", "The demo model")
                    future.set_result(None)
                except BaseException as exc:  # reported by the scan worker that waits for it
                    future.set_exception(exc)

            threading.Thread(target=assemble, name="demo-assembly", daemon=True).start()
        return self._demo_assembly

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
        self.plan_cache.save()
        self.store.close()
