"""The bar above the conversation while a model loads, or reloads after a failed reply: what is
happening and how far. The load runs in the bar's thread worker, which posts LoadProgress and
LoadRetrying (shown here) and LoadFinished (the bar hides, says why a load failed, and the message
goes on to the screen). A recovery the session calls for is asked about here, then carried out the
same way; the screen keeps what is its own (its subtitle, whether it is loading, the context line).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import getters, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Label, ProgressBar
from textual.worker import Worker, WorkerState

from app.conversation.recovery import retry_words
from app.tui.dialog_asks import ConfirmAsked  # the dialogs are the screen's to open
from app.tui.messages import LoadFinished, LoadProgress, LoadRetrying

if TYPE_CHECKING:
    from app.conversation.recovery import Recovery
    from app.session import LoadedModel
    from app.tui.services import Services
    from planner.fit import FitResult
    from planner.model import ModelAnatomy
    from planner.retry import Retry


class LoadBar(Horizontal):
    status = getters.query_one("#load-status", Label)
    progress = getters.query_one("#load-progress", ProgressBar)

    class Failed(Message):
        """The load's worker failed unexpectedly (reported already): the screen is no longer loading."""

    def __init__(self, services: Services, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.services = services
        self.display = False

    def compose(self) -> ComposeResult:
        yield Label("", id="load-status", markup=False)
        yield ProgressBar(id="load-progress", show_eta=False, total=1.0)

    def start(self, status: str) -> None:
        """Show the bar, at nought, saying `status`."""
        self.display = True
        self.status.update(status)
        self.progress.update(total=1.0, progress=0)

    # -- the workers ----------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load(self, path: str, anatomy: ModelAnatomy, fit: FitResult) -> None:
        services = self.services
        try:
            devices = services.devices or services.probe_devices()  # the picker's probe, kept
            services.session.load(
                path, anatomy, fit, devices, self._post_progress, self._post_retry, services.probe_devices
            )
        except Exception as exc:  # LoadFailed, or anything llama.cpp throws: shown, never a traceback
            self.post_message(LoadFinished(str(exc) or type(exc).__name__))
            return
        self.post_message(LoadFinished())

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def recover(self, recovery: Recovery) -> None:
        try:
            _, lost = self.services.session.carry_out(
                recovery, self.services.probe_devices, self._post_progress, self._post_retry
            )
        except Exception as exc:  # LoadFailed, a probe or llama.cpp failing: shown, never a traceback
            self.post_message(LoadFinished(str(exc) or type(exc).__name__))
            return
        if lost:
            self.app.call_from_thread(
                self.app.notify,
                f"Left out: {', '.join(lost)} (it no longer answers). F5 reloads; the settings' rpc_servers "
                "or --rpc bring it back next time.",
                title="RPC server left out",
                severity="warning",
                timeout=15,
            )
        self.post_message(LoadFinished())

    def _post_progress(self, fraction: float) -> None:
        self.post_message(LoadProgress(fraction))

    def _post_retry(self, retry: Retry | None, why: str) -> None:
        changes = retry.changes if retry is not None else ["the CPU's extra buffer types off"]
        self.post_message(LoadRetrying(why, changes, memory=retry is not None))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.group == "load":
            self.display = False
            self.post_message(self.Failed())
            self.services.report_worker_error(event.worker)

    # -- what the workers post ------------------------------------------------------------------

    def on_load_progress(self, message: LoadProgress) -> None:
        message.stop()
        self.progress.update(progress=message.fraction)

    def on_load_retrying(self, message: LoadRetrying) -> None:
        message.stop()
        changes = "; ".join(message.changes)
        self.progress.update(total=1.0, progress=0)
        if not message.memory:
            self.status.update(f"The engine crashed: retrying with {changes}…")
            self.app.notify(f"{message.why}", title="The engine crashed", severity="warning", timeout=15)
            return
        self.status.update(f"Out of memory: retrying with {changes}…")
        self.app.notify(
            retry_words(message.why, message.changes),
            title="Not enough memory",
            severity="warning",
            timeout=10,
        )

    def on_load_finished(self, message: LoadFinished) -> None:
        """The bar hides; a failed load is explained, then the model list comes back. The message goes
        on to the screen."""
        self.display = False
        if not message.error:
            return
        self.post_message(
            ConfirmAsked(
                "The model did not load",
                f"{message.error}\n\nBack to the model list: a shorter context, "
                "fewer GPU layers or a smaller file may fit.",
                self._back_to_the_picker,
                confirm="OK",
            )
        )

    def _back_to_the_picker(self, _ok: object = None) -> None:
        self.app.call_later(self.app.run_action, "show_picker")

    # -- what is said ---------------------------------------------------------------------------

    def ask(self, recovery: Recovery, answer: Callable[[bool], None]) -> None:
        """A reply failed in a way a reload may cure: say what happened, then `answer(True)` to reload,
        at once when the session's policy points to a cure, else once the user has chosen."""
        if not recovery.ask_user:
            self.app.notify(recovery.message, title=recovery.title, severity="error", timeout=15)
            answer(True)
            return

        def chosen(reload: bool | None) -> None:
            if not reload:
                self.app.notify(
                    "The model is not loaded: press F5 to reload it, F2 for the model list.",
                    severity="warning",
                    timeout=8,
                )
            answer(bool(reload))

        self.post_message(ConfirmAsked(recovery.title, recovery.message, chosen, confirm="Reload", focus_confirm=True))

    def tell_loaded(self, model: LoadedModel, chat_open: bool) -> None:
        """The notes on a model just loaded: llama.cpp's dry run, a smaller plan than the one chosen
        (`chat_open`: the conversation is kept), else how long it took."""
        if model.dry_run_message:
            self.app.notify(model.dry_run_message, title="Checked by llama.cpp", severity="warning", timeout=15)
        if model.changes:
            self.app.notify(
                f"{model.name} loaded with a smaller plan than the one chosen: "
                f"{'; '.join(model.changes)}." + (" The conversation is kept: carry on." if chat_open else ""),
                title="Loaded with less memory",
                severity="warning",
                timeout=15,
            )
        else:
            self.app.notify(f"{model.name} loaded in {model.report.seconds:.1f} s", title="Ready", timeout=3)
