"""The vramchat Textual app: the model picker, the chat and the memory dashboard.

The app owns the shared state (settings, conversation store, plan cache, device
report, the model session); screens own their widgets and run their own workers.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from app.plan_cache import PlanCache
from app.settings import Settings, load_settings, save_settings
from app.store import Store
from app.store_recovery import open_store
from app.tui import bench_hook
from app.tui.messages import ScanFinished
from app.tui.screens.picker import PickerScreen
from app.tui.themes import THEMES

if TYPE_CHECKING:
    from app.devices import DeviceReport
    from app.drift import DriftAlarm
    from app.tui.screens.chat import ChatScreen
    from app.tui.session import EngineLike, ModelSession
    from planner.fit import FitResult
    from planner.model import ModelAnatomy


def css_path() -> str:
    """The stylesheet, beside this module (shipped as package data of app.tui). Found from the
    module's own folder: importlib.resources would answer the same for a package on disk (the only
    kind Textual can read a stylesheet from), at the cost of its import, 5 ms of every start."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.tcss")


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


class VramchatApp(App):
    TITLE = "vramchat"
    SUB_TITLE = "plan the memory, then chat"
    CSS_PATH = css_path()
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help"),
        Binding("f2", "toggle_screen", "Models/Chat"),
        Binding("f3", "dashboard", "Dashboard"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, options: AppOptions | None = None, settings: Settings | None = None) -> None:
        super().__init__()
        self.options = options or AppOptions()
        warning = None
        if settings is None:
            settings, warning = load_settings()
        self.settings = settings
        self._startup_warnings = [warning] if warning else []
        self.devices: DeviceReport | None = None
        self._session: ModelSession | None = None  # made on first use: the picker is drawn without it
        self._demo_assembly: Future[Path | None] | None = None
        self._elastic = settings.elastic_context
        self.plan_cache = PlanCache()
        if self.plan_cache.load_error:
            self._startup_warnings.append(self.plan_cache.load_error)
        self.store: Store = self._open_store()
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = self.settings.theme if self.settings.theme in self.available_themes else "vramchat-dark"

    @property
    def session(self) -> ModelSession:
        """The model session (engine, telemetry, the loaded model); its modules, the engine's and the
        whole planner's, are imported when it is first needed, not before the picker is drawn."""
        if self._session is None:
            from app.tui.session import ModelSession, default_engine

            self._session = ModelSession(self.options.engine_factory or default_engine, elastic=self._elastic)
            self._session.on_drift = self._drift_alarm
        return self._session

    def _drift_alarm(self, alarm: DriftAlarm) -> None:
        """A GPU holds more than planned (told once per device and load, from the telemetry's thread)."""
        try:
            self.call_from_thread(self.notify, alarm.line, title="Memory drift", severity="warning", timeout=20)
        except RuntimeError:  # already on the app's thread
            self.notify(alarm.line, title="Memory drift", severity="warning", timeout=20)

    def _open_store(self) -> Store:
        store, notes = open_store(self.options.store_path)
        self._startup_warnings += notes
        return store

    # -- lifecycle ------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._exit_on_signals()
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.install_screen(PickerScreen(self.options.model, autoload=self.options.model is not None), "picker")
        self.push_screen("picker")
        for warning in self._startup_warnings:
            self.notify(warning, severity="warning", timeout=10)

    def _exit_on_signals(self) -> None:
        """SIGTERM and SIGHUP (a closed terminal) end the app as Ctrl+Q does: the engine stops, the
        terminal is put back."""
        import asyncio
        import contextlib
        import signal

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.exit)

    def on_scan_finished(self, message: ScanFinished) -> None:
        bench_hook.mark(self, "planned", quit_after=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.report_worker_error(event)

    def report_worker_error(self, event: Worker.StateChanged) -> None:
        """A worker that failed unexpectedly is reported, never left silent (nor a traceback).
        Worker messages do not bubble: each screen passes its own here."""
        if event.state == WorkerState.ERROR:
            from app.errors import describe

            title, text = describe(event.worker.error)
            self.notify(text, title=f"{title} ({event.worker.group})", severity="error", timeout=15)

    def _theme_changed(self, theme: object) -> None:
        name = getattr(theme, "name", None)
        if name and name != self.settings.theme:
            self.settings.theme = name
            self.save_settings()

    def save_settings(self) -> None:
        try:
            save_settings(self.settings)
        except OSError as exc:
            self.notify(f"Could not save the settings: {exc}", severity="error")

    async def action_quit(self) -> None:
        if self._session is not None:
            self._session.stop()
        self.exit()

    def on_unmount(self) -> None:
        if self._session is not None:
            self._session.close()
        self.plan_cache.save()
        self.store.close()

    def _fatal_error(self) -> None:
        """Never a traceback on screen: write it to a crash log and say where it is."""
        from app.paths import cache_dir

        log = cache_dir() / "crash.log"
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(traceback.format_exc(), encoding="utf-8")
            where = f"details in {log}"
        except OSError:
            where = "no crash log could be written"
        self.bell()
        self._exit_renderables.append(
            Text(f"vramchat stopped on an unexpected error ({where}). Your chats are saved. Please report this.")
        )
        self._close_messages_no_wait()

    # -- services for screens and workers -------------------------------------------------------

    def probe_devices(self) -> DeviceReport:
        """Probe (or simulate) the devices; called from the scan worker, which posts the report (the
        picker stores it in `devices` on the UI thread)."""
        from app.devices import probe_devices  # the probes' modules load in the scan worker, not before the picker

        return probe_devices(self.options.vram, self.options.ram, cpu_only=self.options.cpu, gpu=self.options.gpu)

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
                    self.call_from_thread(self.notify, str(exc), severity="error")
                    future.set_result(None)
                except BaseException as exc:  # reported by the scan worker that waits for it
                    future.set_exception(exc)

            threading.Thread(target=assemble, name="demo-assembly", daemon=True).start()
        return self._demo_assembly

    def chat_screen(self) -> ChatScreen:
        """The chat screen, made on first use (its imports are not needed to draw the picker)."""
        from app.tui.screens.chat import ChatScreen

        if not self.is_screen_installed("chat"):
            self.install_screen(ChatScreen(), "chat")
        chat = self.get_screen("chat")
        assert isinstance(chat, ChatScreen)
        return chat

    def load_model(self, path: str, anatomy: ModelAnatomy, fit: FitResult) -> None:
        chat = self.chat_screen()
        if chat.generating:
            self.session.stop()
        name = anatomy.name or Path(path).name
        self.run_worker(self._switch_and_load(chat, path, anatomy, fit, name), group="switch")

    async def _switch_and_load(
        self, chat: ChatScreen, path: str, anatomy: ModelAnatomy, fit: FitResult, name: str
    ) -> None:
        if self.screen is not chat:
            await self.switch_screen(self.chat_screen())
        chat.begin_load(path, anatomy, fit, name)

    # -- actions --------------------------------------------------------------------------------

    def action_help(self) -> None:
        from app.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_toggle_screen(self) -> None:

        if isinstance(self.screen, PickerScreen):
            await self.action_show_chat()
        else:
            await self.action_show_picker()

    async def action_show_picker(self) -> None:
        from app.tui.screens.chat import ChatScreen

        while len(self.screen_stack) > 2 and not isinstance(self.screen, (PickerScreen, ChatScreen)):
            self.pop_screen()
        if not isinstance(self.screen, PickerScreen):
            await self.switch_screen("picker")

    async def action_show_chat(self) -> None:
        from app.tui.screens.chat import ChatScreen

        while len(self.screen_stack) > 2 and not isinstance(self.screen, (PickerScreen, ChatScreen)):
            self.pop_screen()
        if not isinstance(self.screen, ChatScreen):
            await self.switch_screen(self.chat_screen())

    def action_dashboard(self) -> None:
        from app.tui.screens.dashboard import DashboardScreen

        if isinstance(self.screen, DashboardScreen):
            self.pop_screen()
        else:
            self.push_screen(DashboardScreen())

    def action_set_theme(self, name: str) -> None:
        self.theme = name

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from app.tui.screens.chat import ChatScreen

        yield from super().get_system_commands(screen)
        if isinstance(screen, PickerScreen):
            yield SystemCommand("Load the selected model", "Load it with the plan shown", screen.action_load)
            yield SystemCommand("Rescan for models", "Look in the model folders again", screen.action_rescan)
            yield SystemCommand("Go to the chat", "Switch to the chat screen", self.action_show_chat)
        if isinstance(screen, ChatScreen):
            yield SystemCommand("New chat", "Start a new conversation", screen.action_new_chat)
            yield SystemCommand("Retry the last reply", "Ask the model again", screen.action_retry)
            yield SystemCommand("Copy the last reply", "Copy it to the clipboard", screen.action_copy_reply)
            yield SystemCommand("Export this chat", "Save it as a Markdown file", screen.action_export_chat)
            yield SystemCommand(
                "Reload the model", "Load the model again (after the engine stopped, say)", screen.action_reload_model
            )
            yield SystemCommand("Stop the reply", "Stop generating at once", screen.action_stop)
            yield SystemCommand("Chat settings", "System prompt, temperature, max tokens", screen.action_chat_settings)
            yield SystemCommand("Show or hide the chats list", "Past conversations", screen.action_toggle_chats)
            yield SystemCommand("Show or hide the memory graphs", "Beside the chat", screen.action_toggle_dashboard)
            yield SystemCommand("Choose another model", "Switch to the model list", self.action_show_picker)
        yield SystemCommand("Memory dashboard", "Live graphs and planned vs actual buffers", self.action_dashboard)
        yield SystemCommand("Help", "Keys and what the badges mean", self.action_help)
        yield SystemCommand(
            "Theme: vramchat dark", "For dark terminals", lambda: self.action_set_theme("vramchat-dark")
        )
        yield SystemCommand(
            "Theme: vramchat light", "For light terminals", lambda: self.action_set_theme("vramchat-light")
        )
