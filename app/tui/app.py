"""The vramchat Textual app: the model picker, the chat and the memory dashboard.

The app owns the shared state (settings, conversation store, plan cache, device
report, the model session); screens own their widgets and run their own workers.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from app.settings import Settings
from app.store import Store
from app.tui import bench_hook
from app.tui.breakpoints import fitted
from app.tui.messages import LoadFinished, LoadRequested, ScanFinished
from app.tui.screens.picker import PickerScreen
from app.tui.services import AppOptions, Services
from app.tui.serving import AppServer
from app.tui.themes import DARK, THEMES

if TYPE_CHECKING:
    from textual.content import Content

    from app.devices import DeviceReport
    from app.session import ModelSession
    from app.tui.download_note import DownloadNoted
    from app.tui.hub_messages import ModelDownloaded  # imported with the hub view, not before the picker
    from app.tui.screens.chat import ChatScreen
    from app.tui.screens.hub import HubScreen
    from planner.fit import FitResult
    from planner.model import ModelAnatomy


def _nothing(record: object) -> bool:
    return False


def quiet_hub_logging(quiet: bool = True) -> None:
    """huggingface_hub logs its retries as warnings through a handler of its own on the stderr it found at
    import (Textual's capture does not reach it), over the screen: while the app runs, the hub view says
    what failed in its own words and the library's log goes nowhere."""
    import logging

    if quiet:
        import huggingface_hub.utils.logging  # noqa: F401  (12 ms) its import adds that handler: first, then quiet it

    logger = logging.getLogger("huggingface_hub")
    for handler in logger.handlers:
        if quiet:
            handler.addFilter(_nothing)
        else:
            handler.removeFilter(_nothing)
    logger.propagate = not quiet
    if quiet and not logger.handlers:  # a handler, so that Python's last resort (stderr) is not used
        logger.addHandler(logging.NullHandler())


def css_path() -> str:
    """The stylesheet, beside this module (shipped as package data of app.tui). Found from the
    module's own folder: importlib.resources would answer the same for a package on disk (the only
    kind Textual can read a stylesheet from), at the cost of its import, 5 ms of every start."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.tcss")


SHUTDOWN_GRACE = 5.0  # seconds a shutdown by signal may take before the process ends regardless


class VramchatApp(App):
    TITLE = "vramchat"
    SUB_TITLE = "plan the memory, then chat"
    CSS_PATH = css_path()
    # every screen adapts to the terminal: side panels leave below these widths, cramped rows below 32
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-medium"), (150, "-wide")]  # noqa: RUF012 (an instance attribute in Textual)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help"),
        Binding("f2", "toggle_screen", "Models/Chat", show=False),  # each screen shows it in its own words
        Binding("f3", "dashboard", "Dashboard", show=False),  # Ctrl+G in the chat; F1 and the palette list it
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, options: AppOptions | None = None, settings: Settings | None = None) -> None:
        super().__init__()
        self.services = Services(options or AppOptions(), settings, self._notify_from_anywhere)
        self._notes_said: set[str] = set()
        self._hub: HubScreen | None = None  # the hub view, once made (Textual forgets installed screens first)
        self._chat_to_open: int | None = None  # the chat `--continue` opens once its model loads
        self._download_note = ""  # a hub download's progress, for the other screens' titles (download_note.py)
        self.serving = AppServer()  # the loaded model served to other tools (/serve), when asked
        for theme in THEMES:
            self.register_theme(theme)
        named = self.settings.theme
        if named not in self.available_themes:  # edited by hand: said, and the file left as written
            self.services.startup_warnings.append(
                f"The settings name the theme {named!r}, which vramchat does not have: {DARK.name} is used "
                "(Ctrl+P, then 'theme', lists the themes; the one chosen is saved)."
            )
            named = DARK.name
        self._start_in_theme(named)

    def _start_in_theme(self, name: str) -> None:
        """The first theme, given before the stylesheet is first read. Set as `theme` is (its watcher), it has
        the whole stylesheet read again once the app runs, the one read before thrown away: 10-13 ms of every
        start. Its classes and colours are given here instead; a theme whose darkness differs from Textual's
        default goes the watcher's way (it maps the terminal's ANSI colours for it)."""
        chosen = self.get_theme(name)
        if chosen is None or chosen.dark != self.current_theme.dark:
            self.theme = name
            return
        self.set_reactive(App.theme, name)
        classes = {c: False for c in self.classes if c.startswith("-theme-")}
        classes.update({f"-theme-{name}": True, "-dark-mode": chosen.dark, "-light-mode": not chosen.dark})
        self.update_classes(classes, update=False)
        self.stylesheet.set_variables(self.get_css_variables())

    # the shared state, as the screens see it through `services` (kept here for tests and the CLI)
    @property
    def options(self) -> AppOptions:
        return self.services.options

    @property
    def settings(self) -> Settings:
        return self.services.settings

    @property
    def store(self) -> Store:
        return self.services.store

    @property
    def session(self) -> ModelSession:
        return self.services.session

    @property
    def devices(self) -> DeviceReport | None:
        return self.services.devices

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Notifications carry paths, llama.cpp's words, servers' errors and buffer names ("RPC0[host:port]",
        "vramchat[demo]"): plain text unless a caller asks for markup, made safe for the terminal."""
        from app.terminal_text import terminal_safe

        message, title = terminal_safe(message, multiline=True), terminal_safe(title)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def action_help_quit(self) -> None:
        """Ctrl+C, pressed where it copies nothing: how to quit, in plain words (Textual's own says it in markup)."""
        self.notify("Press Ctrl+Q to quit vramchat.", title="Do you want to quit?")

    def _notify_from_anywhere(self, message: str, severity: str, title: str) -> None:
        level: SeverityLevel = "error" if severity == "error" else "warning"
        if threading.get_ident() == self._thread_id:
            self.notify(message, title=title, severity=level, timeout=15)
        else:
            self.call_from_thread(self.notify, message, title=title, severity=level, timeout=15)

    # -- lifecycle ------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._exit_on_signals()
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        from app.tui.last_used import starting_point

        start = starting_point(self.services)  # the model named, the chat to continue, or the last model
        self._chat_to_open = start.chat_id
        source = "last used" if start.from_last_use else "command line"
        self.install_screen(fitted(self, PickerScreen(self.services, start.model, start.autoload, source)), "picker")
        self.push_screen("picker")
        if start.note:
            self.notify(start.note, timeout=10)
        for warning in self.services.startup_warnings:
            self.notify(warning, severity="warning", timeout=10)

    def _exit_on_signals(self) -> None:
        """SIGTERM and SIGHUP (a closed terminal) end the app as Ctrl+Q does: the reply stops, the
        engine ends, the chats are saved. A closed terminal can take no more output, and a shutdown
        must not hang on one: after SHUTDOWN_GRACE seconds the process ends regardless (its engine
        dies with it), so that nothing stays behind with its terminal gone."""
        import asyncio
        import contextlib
        import signal

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._end_on_signal, sig)

    def _end_on_signal(self, signum: int) -> None:
        import signal

        from app.tui.shutdown import end_within, silence_terminal

        if signum == signal.SIGHUP:
            silence_terminal()  # the terminal is gone: what the app writes now would fail or block
        end_within(SHUTDOWN_GRACE, 128 + signum)
        if self.services.session_started:
            self.session.stop()
        self.exit(return_code=128 + signum)

    def on_scan_finished(self, message: ScanFinished) -> None:
        bench_hook.mark(self, "planned", quit_after=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.report_worker_error(event)

    def report_worker_error(self, event: Worker.StateChanged) -> None:
        """A worker that failed unexpectedly is reported, never left silent (nor a traceback).
        Worker messages do not bubble: each screen passes its own to the services."""
        if event.state == WorkerState.ERROR:
            self.services.report_worker_error(event.worker)

    def _theme_changed(self, theme: object) -> None:
        name = getattr(theme, "name", None)
        if name and name != self.settings.theme:
            self.settings.theme = name
            self.save_settings()

    def save_settings(self) -> None:
        self.services.save_settings()

    async def action_quit(self) -> None:
        if self.services.session_started:
            self.session.stop()
        self.exit()

    def on_unmount(self) -> None:
        if self._hub is not None:
            self._hub.stop_download()  # its partial file is kept, to resume
            from app import sources

            sources.set_note_sink(None)
            quiet_hub_logging(False)
        self.serving.stop()
        self.services.close()

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

    def chat_screen(self) -> ChatScreen:
        """The chat screen, made on first use (its imports are not needed to draw the picker)."""
        from app.tui.screens.chat import ChatScreen

        if not self.is_screen_installed("chat"):
            self.install_screen(ChatScreen(self.services), "chat")
        chat = self.get_screen("chat")
        assert isinstance(chat, ChatScreen)
        return chat

    def hub_screen(self) -> HubScreen:
        """The hub view, made on first use and kept (a download goes on while other screens show)."""
        from app.tui.screens.hub import HubScreen

        if not self.is_screen_installed("hub"):
            from app import sources

            sources.set_note_sink(self._source_note)  # notes about remote models: never to stderr here
            quiet_hub_logging()
            self._hub = HubScreen(self.services)
            self.install_screen(self._hub, "hub")
        hub = self.get_screen("hub")
        assert isinstance(hub, HubScreen)
        return hub

    def _source_note(self, note: str) -> None:
        """A note about a remote model (planned offline from the cache ...), from any thread, once."""
        if note not in self._notes_said:
            self._notes_said.add(note)
            self._notify_from_anywhere(note, "warning", "Hugging Face hub")

    def action_hub(self) -> None:
        """F7: the hub view from the model list (or the chat), and back."""
        from app.tui.screens.hub import HubScreen

        if isinstance(self.screen, HubScreen):
            self.pop_screen()
            self.mutate_reactive(App.sub_title)  # the title lines again, with the download's progress
            return
        hub = self.hub_screen()
        if hub not in self.screen_stack:
            self.push_screen(hub)

    def action_hub_landing(self) -> None:
        """A first start without models of the user's own: the hub view, which hands back to the model
        list if the hub cannot be reached."""
        hub = self.hub_screen()
        hub.landing = True
        if hub not in self.screen_stack:
            self.push_screen(hub)

    def on_download_noted(self, message: DownloadNoted) -> None:
        """A hub download's progress, for the title line of the screens other than the hub's."""
        self._download_note = message.note
        self.mutate_reactive(App.sub_title)  # every header formats its title again

    def format_title(self, title: str, sub_title: str) -> Content:
        formatted = super().format_title(title, sub_title)
        if not self._download_note or self.screen is self._hub:
            return formatted  # no download, or the hub's panel shows its whole progress
        from app.tui.download_note import with_note

        return with_note(formatted, self._download_note, self.size.width)

    def on_model_downloaded(self, message: ModelDownloaded) -> None:
        """A download is whole: the model list shows it, planned and selected, ready to load."""
        from app.tui.screens.hub import HubScreen

        picker = self.get_screen("picker")
        assert isinstance(picker, PickerScreen)
        picker.show_downloaded(message.path)
        if isinstance(self.screen, HubScreen):
            self.pop_screen()
            self.notify(f"{message.name} is downloaded and selected: Enter loads it.", title="Downloaded", timeout=8)
        else:
            self.notify(f"{message.name} is downloaded: it is selected in the model list.", title="Downloaded")

    def on_load_requested(self, message: LoadRequested) -> None:
        self.load_model(message.path, message.anatomy, message.fit)

    def load_model(self, path: str, anatomy: ModelAnatomy, fit: FitResult) -> None:
        chat = self.chat_screen()
        if chat.generating:
            self.session.stop()
        if self.serving.running:  # it served the model going away: /serve serves the next one
            self.serving.stop()
            self.notify("Serving stopped: another model is loading. /serve serves it once it is loaded.")
        name = anatomy.name or Path(path).name
        self.run_worker(self._switch_and_load(chat, path, anatomy, fit, name), group="switch")

    async def _switch_and_load(
        self, chat: ChatScreen, path: str, anatomy: ModelAnatomy, fit: FitResult, name: str
    ) -> None:
        if self.screen is not chat:
            await self.switch_screen(self.chat_screen())
        if self._chat_to_open is not None:  # `--continue`: the last chat, with the model it was held with
            conv_id, self._chat_to_open = self._chat_to_open, None
            await chat.open_conversation(conv_id)
            chat.refresh_chat_list()
        chat.begin_load(path, anatomy, fit, name)

    def on_load_finished(self, message: LoadFinished) -> None:
        """A model loaded (the chat's message, bubbled up): it is the one the next start selects."""
        if not message.error:
            from app.tui.last_used import remember_loaded_model

            remember_loaded_model(self.services)

    # -- actions --------------------------------------------------------------------------------

    def action_help(self) -> None:
        from app.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_slash_help(self) -> None:
        from app.tui.screens.chat_slash import SLASH_HELP
        from app.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen(SLASH_HELP))

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

    def action_toggle_serving(self) -> None:
        """/serve and the palette: serve the loaded model on this engine (the chat keeps working), or stop."""
        if self.serving.running:
            self.serving.stop()
            self.notify("Stopped serving the model.", title="Server")
            self._serving_changed()
            return
        if not self.services.session_started or self.session.model is None:
            self.notify("Load a model first: the server serves the model the chat holds.", severity="warning")
            return
        self.run_worker(self._start_serving, thread=True, group="serving", exclusive=True)

    def _start_serving(self) -> None:
        from app.errors import VramchatError

        try:
            url = self.serving.start(self.session, self.settings)
        except VramchatError as exc:
            self.call_from_thread(self.notify, f"Cannot serve the model: {exc}", severity="error")
            return
        self.call_from_thread(
            self.notify,
            f"{self.serving.model_id} at {url}: point a tool at it with OPENAI_BASE_URL={url} "
            "(F3 shows its requests; /serve again stops it).",
            title="Serving the model",
            timeout=10,
        )
        self.call_from_thread(self._serving_changed)

    def _serving_changed(self) -> None:
        if self.is_screen_installed("chat"):
            self.chat_screen().update_context_line()

    def action_dashboard(self) -> None:
        from app.tui.screens.dashboard import DashboardScreen

        if isinstance(self.screen, DashboardScreen):
            self.pop_screen()
        else:
            self.push_screen(DashboardScreen(self.services))

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """An SVG of the screen, saved where it can be (the Downloads folder when there is one, else
        vramchat's own folder), and the path said; a failure says why."""
        from app.tui.screenshot import screenshot_folder

        folder = path or str(screenshot_folder())
        try:
            saved = self.save_screenshot(filename, folder)
        except OSError as exc:
            self.notify(f"Could not save the screenshot in {folder}: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"Saved as {saved}", title="Screenshot", timeout=8)

    def action_toggle_continue(self) -> None:
        """The continue_last_chat setting: every start opens the last chat with its model."""
        self.settings.continue_last_chat = not self.settings.continue_last_chat
        self.save_settings()
        on = self.settings.continue_last_chat
        self.notify("Every start opens the last chat with its model." if on else "Starts open the model list.")

    def action_set_theme(self, name: str) -> None:
        self.theme = name

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from app.tui.screens.chat import ChatScreen

        for command in super().get_system_commands(screen):
            if command.title == "Screenshot":  # Textual's saves to a Downloads folder alone, and fails without one
                command = SystemCommand("Screenshot", "Save an SVG of the screen and say where", self.action_screenshot)
            yield command
        if isinstance(screen, PickerScreen):
            yield SystemCommand("Load the selected model", "Load it with the plan shown", screen.action_load)
            yield SystemCommand("Rescan for models", "Look in the model folders again", screen.action_rescan)
            yield SystemCommand(
                "Delete the selected model",
                "One vramchat downloaded, and its projector (Delete)",
                screen.action_delete_model,
            )
            yield SystemCommand(
                "RPC servers", "Other machines whose GPUs or RAM to plan for (F6)", screen.action_rpc_servers
            )
            yield SystemCommand(
                "Hugging Face hub",
                "Search the hub, every quant planned for this machine, download (F7)",
                self.action_hub,
            )
            yield SystemCommand("Go to the chat", "Switch to the chat screen", self.action_show_chat)
        from app.tui.screens.hub import HubScreen

        if isinstance(screen, HubScreen):
            yield from screen.palette_commands()
            yield SystemCommand("Back to the model list", "Local models (F7)", self.action_hub)
        if isinstance(screen, ChatScreen):
            yield SystemCommand("New chat", "Start a new conversation", screen.action_new_chat)
            yield SystemCommand(
                "Retry the last reply", "Ask again; the earlier reply is kept (Ctrl+R)", screen.action_retry
            )
            yield from screen.controller.palette_commands()  # the chat as a tree, and managing chats
            yield SystemCommand(
                "Copy the last reply", "Copy it to the clipboard, as written (Ctrl+O)", screen.action_copy_reply
            )
            yield SystemCommand(
                "Select a message or code block",
                "↑ ↓ choose, c copies it (Ctrl+↑)",
                lambda: self.call_after_refresh(screen.action_select_messages),
            )
            yield SystemCommand("Slash commands", "What / runs in the message box (/help)", self.action_slash_help)
            yield SystemCommand(
                "Export this chat", "Save it as Markdown and JSON, with its plan receipt", screen.action_export_chat
            )
            yield SystemCommand(
                "Plan receipt of this chat",
                "The plan it ran with, llama.cpp's dry run and the measured peaks (F8)",
                screen.action_receipt,
            )
            yield SystemCommand(
                "Reload the model", "Load the model again (after the engine stopped, say)", screen.action_reload_model
            )
            yield SystemCommand("Stop the reply", "Stop generating at once", screen.action_stop)
            yield SystemCommand(
                "Chat settings", "This chat's system prompt, sampling, presets (F4)", screen.action_chat_settings
            )
            yield SystemCommand(
                "Thinking on or off",
                "For this chat, where the model's template has the switch (F9)",
                screen.action_toggle_thinking,
            )
            yield SystemCommand("Show or hide the chats list", "Past conversations", screen.action_toggle_chats)
            yield SystemCommand("Show or hide the memory graphs", "Beside the chat", screen.action_toggle_dashboard)
            yield SystemCommand("Choose another model", "Switch to the model list", self.action_show_picker)
        yield SystemCommand("Memory dashboard", "Live graphs and planned vs actual buffers", self.action_dashboard)
        if self.serving.running:
            yield SystemCommand(
                "Stop serving the model",
                f"Other tools reach it at {self.serving.url} (/serve)",
                self.action_toggle_serving,
            )
        else:
            yield SystemCommand(
                "Serve the model to other tools",
                "The loaded model behind an OpenAI-compatible API on 127.0.0.1, on this engine (/serve)",
                self.action_toggle_serving,
            )
        on = self.settings.continue_last_chat
        yield SystemCommand(
            f"Start on the last chat: {'on (turn off)' if on else 'off (turn on)'}",
            "Every start opens the last chat with its model, as vramchat --continue does",
            self.action_toggle_continue,
        )
        yield SystemCommand("Help", "Keys and what the badges mean", self.action_help)
        yield SystemCommand(
            "Theme: vramchat dark", "For dark terminals", lambda: self.action_set_theme("vramchat-dark")
        )
        yield SystemCommand(
            "Theme: vramchat light", "For light terminals", lambda: self.action_set_theme("vramchat-light")
        )
