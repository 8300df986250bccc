"""The hub view's work off the UI thread: a search, the badges of the repos found, an opened repo's listing
and every quant of it planned, the speed figures asked again while this CPU is still being measured.

Each runs as a thread worker of the hub screen and posts what it finds (app/tui/hub_messages.py) with the
request it answers: the screen drops answers to a search or a repo the user has since left, and a worker
no longer wanted stops waiting for the network (app/tui/abandon.py). The download is the download panel's
(app/tui/widgets/download_panel.py).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.worker import get_current_worker

from app.errors import VramchatError
from app.tui.abandon import POLL, Abandoned, call_abandonable
from app.tui.hub_messages import QuantPlanned, QuantSpeeds, QuantsPlanned, RepoBadged, RepoListed, ReposFound

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.timer import Timer

    from app.devices import DeviceReport
    from app.planning import Planned
    from app.quants import QuantRow
    from app.sources.model import ModelSource
    from app.tui.services import Services
    from planner.model import ModelAnatomy

SEARCH_LIMIT = 20  # repos a search or the most downloaded list shows (each is badged: a header read)
BADGE_PARALLEL = 4  # repos badged at once


class HubController:
    """The hub view's workers, run on `screen` (their messages go to it, they end with it)."""

    def __init__(self, screen: Screen, services: Services) -> None:
        self.screen = screen
        self.services = services
        self.search_request = 0  # the search whose answers are wanted
        self.open_request = 0  # the opened repo whose answers are wanted
        self.report: DeviceReport | None = None  # the devices the badges were planned for
        self._speed_timer: Timer | None = None  # asks the speed again while a figure reads "measuring…"

    def _run(self, work: Callable[[], None], name: str, group: str) -> None:
        self.screen.run_worker(work, name=name, group=group, exclusive=True, thread=True, exit_on_error=False)

    def _devices(self) -> DeviceReport:
        """The devices to plan for (in a worker): the picker's probe, or a probe of our own before it."""
        report = self.services.devices or self.services.probe_devices()
        self.report = report
        return report

    def devices_changed(self) -> bool:
        """Whether the devices are not those the badges were planned for (RPC servers, memory others took, as
        the picker's plan cache tells them apart)."""
        from app.caches.plans import device_fingerprint

        now, then = self.services.devices, self.report
        if now is None or then is None:
            return False
        return device_fingerprint(now.gpus, now.host) != device_fingerprint(then.gpus, then.host)

    # -- searching --------------------------------------------------------------------------------

    def search(self, text: str) -> None:
        """Ask the hub for GGUF repos whose name holds `text` (the most downloaded chat repos for '')."""
        self.search_request += 1
        self._run(partial(self._search, text, self.search_request), "_search", "hub-search")

    def _search(self, text: str, request: int) -> None:
        from app.sources import hub
        from app.sources.errors import SourceError, Unreachable

        try:
            if text:
                repos = call_abandonable(hub.search_repos, text, SEARCH_LIMIT)
            else:
                repos = call_abandonable(hub.popular_chat_repos, SEARCH_LIMIT)
        except Abandoned:
            return
        except Unreachable as exc:
            self.screen.post_message(ReposFound(request, text, hub.seen_repos(text, SEARCH_LIMIT), offline=str(exc)))
            return
        except SourceError as exc:
            self.screen.post_message(ReposFound(request, text, [], error=str(exc)))
            return
        self.screen.post_message(ReposFound(request, text, repos))

    def badge(self, repo_ids: list[str], request: int) -> None:
        """Badge each repo with one quant planned for this machine, a few at a time."""
        self._run(partial(self._badge, repo_ids, request), "_badge", "hub-badges")

    def _badge(self, repo_ids: list[str], request: int) -> None:
        from app.quants import RepoFit, repo_fit
        from app.sources import load_anatomy

        worker = get_current_worker()
        plan = _planner(self._devices())
        todo: queue.SimpleQueue[str] = queue.SimpleQueue()
        for repo_id in repo_ids:
            todo.put(repo_id)
        left = [len(repo_ids)]
        lock, finished = threading.Lock(), threading.Event()

        def stale() -> bool:
            return worker.is_cancelled or request != self.search_request

        def badge_some() -> None:  # in a daemon thread: a stale search or quitting does not wait for it
            while not stale():
                try:
                    repo_id = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    fit = repo_fit(repo_id, load_anatomy, plan)
                except Exception as exc:  # a hostile header must not take the list down: that repo says why
                    fit = RepoFit(repo_id, problem="unreadable", error=f"{type(exc).__name__}: {exc}")
                if not stale():
                    self.screen.post_message(RepoBadged(request, fit))
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        finished.set()

        for _ in range(min(BADGE_PARALLEL, len(repo_ids))):
            threading.Thread(target=badge_some, name="hub-badge", daemon=True).start()
        while not finished.wait(POLL) and not stale():
            pass

    # -- a repo opened: every quant planned -------------------------------------------------------

    def open(self, repo_id: str) -> None:
        """List the repo's files, then plan every GGUF model of it, as their headers arrive."""
        self.open_request += 1
        self._run(partial(self._open, repo_id, self.open_request), "_open", "hub-open")

    def _open(self, repo_id: str, request: int) -> None:
        from app.quants import plan_quants
        from app.sources import hub, load_anatomy

        post = self.screen.post_message
        try:
            listing = call_abandonable(hub.list_repo, repo_id)
        except Abandoned:
            return
        except VramchatError as exc:
            post(RepoListed(request, None, [], {}, str(exc), exc.title))
            return
        models = hub.repo_models(listing)
        post(RepoListed(request, listing, models, _on_this_machine(models)))
        if not models:
            return
        worker = get_current_worker()
        plan = _planner(self._devices())

        def planned(index: int, row: QuantRow) -> None:
            if worker.is_cancelled or request != self.open_request:
                raise _Stale
            post(QuantPlanned(request, index, row))

        try:
            table = call_abandonable(plan_quants, models, load_anatomy, plan, on_row=planned)
        except (Abandoned, _Stale):
            return
        post(QuantsPlanned(request, table))

    # -- a speed still being measured -------------------------------------------------------------

    def watch_speeds(self, measuring: Callable[[], dict[int, QuantRow]]) -> None:
        """Ask again once the probe may run again (app.speed.machine.RETRY_SECONDS), while a figure waits
        (`measuring`: the opened repo's rows whose speed reads "measuring…")."""
        if self._speed_timer is not None:
            self._speed_timer.stop()
            self._speed_timer = None
        if measuring():
            from app.speed.machine import RETRY_SECONDS

            request = self.open_request
            ask = partial(self._run, partial(self._ask_speeds, measuring, request), "_ask_speeds", "hub-speeds")
            self._speed_timer = self.screen.set_timer(RETRY_SECONDS + 1, ask)

    def _ask_speeds(self, measuring: Callable[[], dict[int, QuantRow]], request: int) -> None:
        from app.speed import plan_speed

        rows = measuring()
        if not rows or request != self.open_request:
            return
        gpus = self._devices().gpus
        speeds = {i: plan_speed(r.result.plan, gpus) for i, r in rows.items() if r.result is not None}
        self.screen.post_message(QuantSpeeds(request, speeds))


def _planner(report: DeviceReport) -> Callable[[ModelSource, ModelAnatomy], Planned]:
    """A remote model planned as the picker plans a local one: this machine's devices, no knob set."""
    from app.planning import PlanChoice, plan_source

    def plan(source: ModelSource, anatomy: ModelAnatomy) -> Planned:
        return plan_source(source, report, PlanChoice(), anatomy=anatomy)

    return plan


class _Stale(Exception):
    """The repo being planned is no longer the one shown."""


def _on_this_machine(models: list[ModelSource]) -> dict[str, str]:
    """Which of the models are whole on this machine already (the models folder, the Hugging Face cache)."""
    from app.sources.download import plan_download

    found = {}
    for model in models:
        try:
            plan = plan_download(model, with_projector=False)
        except VramchatError:
            continue
        if not plan.files:
            found[model.ref] = str(plan.model_path)
    return found
