"""The hub view's download: one model (and its projector) at a time, with its progress, cancel, resume.

`request(source)` checks the room first (a full disk is refused before a byte, saying how much is needed
and free), asks (the screen opens the question: app/tui/dialog_asks.py), then downloads in a thread
worker (app/sources/download.py: a hidden partial file, resumed, the sha256 checked); progress comes at
most 10 times a second. A cancelled or failed download keeps what arrived, hidden (never in the model
list), for Resume, or Delete; where nothing is kept (a failed checksum removes the file) it offers Download
again. A finished one is posted to the app (ModelDownloaded: the model list selects it) and to the screen
(DownloadPanel.Finished)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, ProgressBar, Static
from textual.worker import Worker, WorkerState

from app.errors import VramchatError
from app.terminal_text import terminal_safe
from app.tui.abandon import Abandoned, call_abandonable
from app.tui.dialog_asks import ConfirmAsked
from app.tui.download_note import DownloadNoted, progress_note
from app.tui.hub_messages import DownloadEnded, DownloadPrepared, DownloadProgressed, ModelDownloaded
from app.tui.while_running import while_running
from planner.units import format_size

if TYPE_CHECKING:
    from collections.abc import Iterator

    from app.sources.download import Download
    from app.sources.model import ModelSource


class DownloadPanel(Vertical):
    @dataclass
    class Finished(Message):
        """A model is whole on this machine (to the screen, which marks it)."""

        source: ModelSource
        path: str

    class ButtonsGone(Message):
        """The focused button was hidden (pressed, its download stopped or gone): the screen takes the focus."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.downloading: ModelSource | None = None
        self.stopped: ModelSource | None = None  # cancelled or failed: resumed, or downloaded again
        self.kept = 0  # bytes the stopped download's hidden partial files hold (0: it starts over)
        self.last_done = 0  # bytes done at the last progress
        self._cancel = threading.Event()
        self._asking = False  # a download is being checked or asked about: one at a time
        self._fit = ""
        self._note = ""  # the progress as the other screens' title line shows it (app/tui/download_note.py)

    def compose(self) -> ComposeResult:
        yield Static("", id="download-status", markup=False)
        with Horizontal(id="download-bar"):
            yield ProgressBar(id="download-progress", show_eta=False)
            yield Button("Cancel", id="download-cancel", compact=True)
            yield Button("Resume", id="download-resume", compact=True, variant="primary")
            yield Button("Delete the partial file", id="download-discard", compact=True)

    def on_mount(self) -> None:
        self.display = False

    @property
    def busy(self) -> bool:
        return self.downloading is not None or self._asking

    def allows(self, action: str) -> bool:
        """Whether the screen's download key `action` does something now (the footer shows those that do)."""
        if action == "cancel_download":
            return self.downloading is not None
        stopped = self.stopped is not None and self.downloading is None
        if action in ("resume_download", "discard_partial"):
            return stopped and self.kept > 0
        if action == "download_again":
            return stopped and self.kept == 0
        return True

    def palette_commands(self) -> Iterator[SystemCommand]:
        """What can be done now with the download, for the command palette."""
        if self.allows("cancel_download"):
            yield SystemCommand("Cancel the download", "What arrived is kept to resume (Ctrl+X)", self.cancel)
        if self.allows("resume_download"):
            yield SystemCommand("Resume the download", "From what arrived before (Ctrl+R)", self.resume)
            yield SystemCommand(
                "Delete the partial file", "What arrived of the stopped download (Delete)", self.discard
            )
        if self.allows("download_again"):
            yield SystemCommand("Download again", "The stopped download, from the start (Ctrl+R)", self.resume)

    def request(self, source: ModelSource, fit: str = "") -> None:
        """Download `source` (and its projector) after checking the room and asking; `fit` is its badge."""
        if self.downloading is not None:
            self.app.notify(
                f"{self.downloading.file_name} is downloading: one at a time (Ctrl+X cancels it).", severity="warning"
            )
            return
        if self._asking:
            return
        self._asking, self._fit = True, fit
        self._line(f"Checking the room for {source.file_name}", stopped=self.stopped is not None)
        self._prepare(source)

    @work(thread=True, group="hub-prepare", exit_on_error=False)
    def _prepare(self, source: ModelSource) -> None:
        from app.sources.download import plan_download

        try:
            self.post_message(DownloadPrepared(source, plan_download(source)))
        except VramchatError as exc:
            self.post_message(DownloadPrepared(source, None, str(exc), exc.title))

    @while_running
    def on_download_prepared(self, message: DownloadPrepared) -> None:
        from app.sources.download import check_room
        from app.sources.errors import NoRoom

        source, plan = message.source, message.plan
        if plan is None:
            self._asking = False
            self._failed(message.error, message.title, stopped=self.stopped is not None)
            return
        try:
            check_room(source, plan)
        except NoRoom as exc:
            self._asking = False
            self._failed(str(exc), exc.title, stopped=self.stopped is not None)
            return
        if not plan.files and plan.projector_to_hf_cache is None:
            self._asking = False
            self._start(source)  # whole on this machine already: listed and selected at once
            return

        def answered(yes: bool | None) -> None:
            self._asking = False
            if yes:
                self._start(source)
            else:
                self._line("Not downloaded.", stopped=self.stopped is not None)

        words = download_words(source, plan, self._fit)
        self.post_message(ConfirmAsked("Download this model?", words, answered, confirm="Download", focus_confirm=True))

    def _start(self, source: ModelSource) -> None:
        if self.downloading is not None:
            return
        self.downloading, self.stopped, self.kept = source, None, 0
        self._cancel = threading.Event()
        self.last_done = 0
        self._line(f"Downloading {source.file_name}", progress=True)
        self.screen.refresh_bindings()
        self._download(source, self._cancel)

    @work(thread=True, group="hub-download", exit_on_error=False)
    def _download(self, source: ModelSource, cancel: threading.Event) -> None:
        from app.sources.download import Progress, download
        from app.sources.errors import Cancelled

        def progress(p: Progress) -> None:
            self.post_message(DownloadProgressed(p))

        try:
            result = call_abandonable(download, source, progress=progress, cancel=cancel)
        except Abandoned:  # the app is quitting: the download stops at its next chunk, its partial file kept
            cancel.set()
            return
        except Cancelled:
            self.post_message(DownloadEnded(source, None, cancelled=True, kept=_kept(source)))
            return
        except VramchatError as exc:
            kept = _kept(source)
            self.post_message(DownloadEnded(source, None, error=str(exc), title=exc.title, kept=kept))
            return
        self.post_message(DownloadEnded(source, result))

    @while_running
    def on_download_progressed(self, message: DownloadProgressed) -> None:
        from app.sources.download import format_duration

        p = message.progress
        if self.downloading is None:
            return
        self.last_done = p.done
        if p.phase == "done":
            words = f"{p.file}: all {format_size(p.total)} arrived, checked"
        else:
            speed = f"{format_size(int(p.speed))}/s" if p.speed else "starting"
            left = f", {format_duration(p.seconds_left)} left" if p.seconds_left is not None else ""
            words = f"Downloading {p.file}: {format_size(p.done)} of {format_size(p.total)} · {speed}{left}"
        self.query_one("#download-status", Static).update(terminal_safe(words))
        self.query_one("#download-progress", ProgressBar).update(total=max(p.total, 1), progress=p.done)
        self._tell_the_app(progress_note(p))

    @while_running
    def on_download_ended(self, message: DownloadEnded) -> None:
        source = message.source
        self.downloading = None
        self.screen.refresh_bindings()
        self._tell_the_app("")
        if message.cancelled:
            self.stopped, self.kept = source, message.kept
            if message.kept:
                what = (
                    f"{format_size(message.kept)} arrived and is kept hidden, not in the model list: "
                    "Resume (Ctrl+R) goes on from there, Delete removes it."
                )
            else:
                what = "Nothing arrived: Download again (Ctrl+R) starts it."
            self._line(f"Cancelled {source.file_name}. {what}", stopped=True)
            self.app.notify(f"{source.file_name}: download cancelled.", title="Download cancelled", timeout=5)
            return
        if message.result is None:
            self.stopped, self.kept = source, message.kept
            self._failed(message.error, message.title, stopped=True)
            return
        result = message.result
        if result.from_hf_cache:
            how = "in the Hugging Face cache, where another tool put it (used there, not copied)"
        elif result.downloaded == 0:
            how = f"already whole in {result.model_path.parent}"
        else:
            checked = " (sha256 checked)" if any(f.sha256 for f in source.files) else ""
            how = f"{format_size(result.downloaded)} written to {result.model_path.parent}{checked}"
        self._line(f"Downloaded {source.file_name}: {how}.")
        self.post_message(self.Finished(source, str(result.model_path)))
        self.app.post_message(ModelDownloaded(str(result.model_path), source.file_name))

    def _tell_the_app(self, note: str) -> None:
        """The progress for the title line of the other screens, when it changed ('' when it ended)."""
        if note != self._note:
            self._note = note
            self.app.post_message(DownloadNoted(note))

    def _failed(self, error: str, title: str, stopped: bool = False) -> None:
        self._line(f"✗ {error}", stopped=stopped, error=True)
        self.app.notify(error, title=title or "The download did not start", severity="error", timeout=12)

    def _line(self, text: str, progress: bool = False, stopped: bool = False, error: bool = False) -> None:
        """Show the panel with `text`: the bar and Cancel while downloading, Resume and Delete when stopped
        with a partial file kept, Download again when stopped with none."""
        self.display = True
        status = self.query_one("#download-status", Static)
        status.update(Text(terminal_safe(text), style=f"bold {self.app.current_theme.error}" if error else ""))
        bar = self.query_one("#download-progress", ProgressBar)
        if progress:
            bar.update(total=None, progress=0)
        bar.display = progress
        focused = self.screen.focused
        buttons = list(self.query(Button))
        self.query_one("#download-cancel").display = progress
        resume = self.query_one("#download-resume", Button)
        resume.display = stopped
        resume.label = "Resume" if self.kept else "Download again"
        self.query_one("#download-discard").display = stopped and self.kept > 0
        self.query_one("#download-bar").display = progress or stopped
        if focused in buttons and not (focused.display and self.query_one("#download-bar").display):
            self.post_message(self.ButtonsGone())

    @on(Button.Pressed, "#download-cancel")
    def cancel(self) -> None:
        """Stop the download at its next chunk: what arrived is kept, hidden, to resume."""
        if self.downloading is not None:
            self._cancel.set()
            self.query_one("#download-status", Static).update(f"Cancelling {terminal_safe(self.downloading.file_name)}")

    @on(Button.Pressed, "#download-resume")
    def resume(self) -> None:
        if self.stopped is not None:
            self._start(self.stopped)

    @on(Button.Pressed, "#download-discard")
    def discard(self) -> None:
        from app.sources.download import discard_partial

        if self.stopped is None:
            return
        source, self.stopped, self.kept = self.stopped, None, 0
        freed = discard_partial(source)
        self._line(f"Deleted what had arrived of {source.file_name} ({format_size(freed)}).")
        self.screen.refresh_bindings()

    def stop(self) -> None:
        """The app is quitting: a download running stops at its next chunk, its partial file kept."""
        self._cancel.set()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        event.stop()  # said here, once
        from app.errors import describe

        self.downloading, self._asking = None, False
        self.screen.refresh_bindings()
        self._tell_the_app("")
        title, text = describe(event.worker.error)
        self._failed(f"The download stopped on an unexpected error: {text}", title)


def _kept(source: ModelSource) -> int:
    """The bytes a stopped download keeps (0 where they cannot be read: nothing to resume from)."""
    from app.sources.download import partial_bytes

    try:
        return partial_bytes(source)
    except (OSError, VramchatError):
        return 0


def download_words(source: ModelSource, plan: Download, fit: str = "") -> str:
    """What a download will write, where, how much of it is still to come and how much room there is."""
    from app.sources.download import destination_folder

    files = [f for f, _ in plan.files]
    model = [f for f in files if f in source.files]
    extra = [f for f in files if f not in source.files]
    if plan.projector_to_hf_cache is not None:
        extra.append(plan.projector_to_hf_cache)
    lines = []
    if model:
        pieces = f" in {len(model)} files" if len(model) > 1 else ""
        lines.append(f"{source.file_name} ({format_size(sum(f.size for f in model))}{pieces})")
    for f in extra:
        lines.append(f"{'and its ' if model else ''}vision projector {f.file_name} ({format_size(f.size)})")
    where = plan.model_path.parent if plan.from_hf_cache else destination_folder(source)
    lines.append(f"into {where}")
    total = sum(f.size for f in files)
    lines.append(f"\n{format_size(plan.needed)} to download, {format_size(plan.free)} free there.")
    if total > plan.needed:
        lines.append(f"{format_size(total - plan.needed)} arrived before: the rest is downloaded.")
    if fit:
        lines.append(f"Fit on this machine: {fit}.")
    return "\n".join(lines)
