"""The model list's work off the UI thread: the scan (devices probed, folders listed, every model planned),
the selected model's plan, its speed asked again while this CPU is still being measured, and llama.cpp's
dry run over the rows whose plan is an estimate.

Each runs as a thread worker of the picker screen and posts what it finds (app/tui/messages.py); the
screen draws it on the UI thread, where the state these workers read is kept.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual.worker import get_current_worker

from app.catalog import Catalog, CatalogEntry
from app.discovery import ModelFile, folders_to_scan
from app.terminal_text import terminal_safe
from app.tui.messages import (
    ChecksDone,
    DevicesProbed,
    EntriesAdded,
    EntriesPlanned,
    EstimateChecked,
    PlanComputed,
    ScanFinished,
    ScanListed,
    ScanStatus,
    SpeedAsked,
)
from planner.errors import PlannerError

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.timer import Timer

    from app.planning import PlanChoice
    from app.tui.services import Services
    from planner.fit import FitResult
    from planner.memory import MemoryPlan
    from planner.model import ModelAnatomy
    from planner.speed import SpeedPrediction

PLANNED_BATCH_SECONDS = 0.15  # planned rows reach the table at most this often during a scan
FIRST_LIST_WAIT = 0.25  # the picker's first frame waits this long at most for the list (app.tui.screens.picker)
DEMO_STATUS = "preparing the demo model (once)"


class PickerController:
    """The picker's workers, run on `screen` (their messages go to it, they end with it)."""

    def __init__(self, screen: Screen, services: Services) -> None:
        self.screen = screen
        self.services = services
        self.anatomies: dict[str, ModelAnatomy] = {}  # the headers read, per entry of the list
        # estimated rows checked by llama.cpp's dry run in the background (app.estimate_check)
        self.checks_queued: list[CatalogEntry] = []
        self.checks_asked: set[str] = set()
        self.checking = False
        self._speed_timer: Timer | None = None  # asks the speed again while it reads "measuring…"
        self._listed = threading.Event()  # the scan has posted its list (or ended without one)

    def _run(self, work: Callable[[], None], name: str, group: str, exclusive: bool = True) -> None:
        self.screen.run_worker(work, name=name, group=group, exclusive=exclusive, thread=True, exit_on_error=False)

    # -- the scan -------------------------------------------------------------------------------

    def scan(self, preselect: str | None, preselect_source: str) -> None:
        """List and plan every model found; `preselect`: a file the command line named, listed even where
        no folder scanned holds it (said to be from `preselect_source`)."""
        self.checks_asked.clear()  # devices may have changed: estimates are checked again
        self._listed.clear()
        self._run(partial(self._scan, preselect, preselect_source), "_scan", "scan")

    async def wait_for_list(self, seconds: float | None = None) -> bool:
        """Until the scan has posted its list, `seconds` at most: whether it has. Awaited by the screen's mount,
        whose first frame then draws the list it would otherwise draw a frame later; meanwhile the UI thread
        leaves the scan the GIL (drawing the empty screen took half of it)."""
        import asyncio

        limit = FIRST_LIST_WAIT if seconds is None else seconds
        return await asyncio.get_running_loop().run_in_executor(None, self._listed.wait, limit)

    def _scan(self, preselect: str | None, preselect_source: str) -> None:
        try:
            self._scan_and_plan(preselect, preselect_source)
        finally:
            self._listed.set()  # a scan that failed or ended early keeps nobody waiting

    def _scan_and_plan(self, preselect: str | None, preselect_source: str) -> None:
        app = self.services
        post = self.screen.post_message
        post(ScanStatus("Probing devices…"))
        try:
            report = app.probe_devices()
        except ValueError as exc:
            post(DevicesProbed(None, str(exc)))
            return
        post(DevicesProbed(report))
        demo, demo_unassembled = app.assembled_demo()
        # a first start assembles the demo model (seconds, mostly hashing and copying, off the GIL)
        # beside listing and planning the other models, and adds it when it is whole
        assembly = app.demo_assembly() if demo_unassembled else None
        options = app.options
        settings = app.settings
        folders = folders_to_scan(options.models_dirs, settings.models_dirs, settings.scan_known_caches)
        catalog = Catalog(report.gpus, report.host, app.plan_cache)

        def looking_in(folder: str) -> None:
            post(ScanStatus(f"Looking in {folder}"))

        entries = catalog.scan(folders, demo, progress=looking_in)
        if preselect and not any(os.path.realpath(e.file.path) == os.path.realpath(preselect) for e in entries):
            try:
                st = os.stat(preselect)
                entries.insert(
                    0, CatalogEntry(ModelFile(preselect, preselect_source, st.st_size, st.st_mtime_ns, [preselect]))
                )
            except OSError as exc:
                post(ScanStatus(f"{preselect}: {exc.strerror or exc}"))
        post(ScanListed(entries, demo_pending=assembly is not None))
        self._listed.set()
        todo = [e for e in entries if not e.fresh]
        total = len(todo) + (1 if assembly is not None else 0)
        if not self._plan_entries(catalog, todo, 0, total, assembly):
            return
        if assembly is not None:
            if not assembly.done():
                # with nothing planned yet, the bar stays indeterminate (it pulses) rather than at 0%
                post(ScanStatus(DEMO_STATUS.capitalize(), len(todo), total if todo else 0))
            demo = assembly.result()
            known = {e.file.entry_id for e in entries}
            added = [e for e in catalog.scan(folders, demo) if e.file.entry_id not in known] if demo else []
            if added:
                post(EntriesAdded(added))
                stale = [e for e in added if not e.fresh]
                if not self._plan_entries(catalog, stale, len(todo), len(todo) + len(stale), None):
                    return
                todo += stale
        catalog.cache.save()
        post(ScanFinished(len(todo)))

    def _plan_entries(
        self,
        catalog: Catalog,
        todo: list[CatalogEntry],
        done: int,
        total: int,
        assembly: Future[Path | None] | None,
    ) -> bool:
        """Plan `todo` in this worker, posting the planned rows in batches: a message (and repaint)
        per row would take the UI thread's share of the GIL from the planning. False when cancelled."""
        worker = get_current_worker()

        def status(index: int) -> str:
            text = f"Planning {terminal_safe(todo[index].file.file_name)}" if index < len(todo) else "Planned"
            if assembly is not None and not assembly.done():
                text += f" · {DEMO_STATUS}"
            return text

        if todo:
            self.screen.post_message(ScanStatus(status(0), done, total))
        batch: list[CatalogEntry] = []
        posted = time.monotonic()
        planned = catalog.planned(todo)
        try:
            for index, entry in enumerate(planned):
                if worker.is_cancelled:
                    return False
                batch.append(entry)
                now = time.monotonic()
                if now - posted >= PLANNED_BATCH_SECONDS or index == len(todo) - 1:
                    self.screen.post_message(EntriesPlanned(batch, status(index + 1), done + index + 1, total))
                    batch, posted = [], now
        finally:
            planned.close()  # a cancelled scan stops its worker processes
        return True

    # -- the selected model's plan ----------------------------------------------------------------

    def plan(
        self,
        path: str,
        choice: PlanChoice,
        request: int,
        projectors: list[str],
        model_file: str,
        *,
        anatomy: ModelAnatomy | None,
        checked: FitResult | None,
    ) -> None:
        """Plan the entry `path` (its key in the list) from `model_file`; `anatomy`: its header where the
        command line read it already; `checked`: the plan llama.cpp confirmed, for the default choice."""
        work = partial(self._plan, path, choice, request, projectors, model_file, anatomy, checked)
        self._run(work, "_plan", "plan")

    def _plan(
        self,
        path: str,
        choice: PlanChoice,
        request: int,
        projectors: list[str],
        model_file: str,
        anatomy: ModelAnatomy | None,
        checked: FitResult | None,
    ) -> None:
        from app.planning import plan_source, projector_among, read_anatomy

        post = self.screen.post_message
        report = self.services.devices or self.services.probe_devices()  # planned only once probed: kept
        try:
            model = self.anatomies.get(path)
            if model is None and anatomy is not None:
                model = anatomy  # read by the command line at start: not read again
                self.anatomies[path] = model
            if model is None:
                model = read_anatomy(model_file)  # a header read before comes from the cache
                self.anatomies[path] = model
            rule = projector_among(projectors, self.services.options.image_max_tokens) if projectors else None
            planned = plan_source(model_file, report, choice, anatomy=model, projector=rule, known=checked)
            result, note, speed = planned.fit, planned.projector_note, planned.speed
        except PlannerError as exc:
            post(PlanComputed(path, request, None, getattr(exc, "problem", None) or str(exc)))
            return
        except Exception as exc:  # a hostile header must not take the picker down
            post(PlanComputed(path, request, None, f"{type(exc).__name__}: {exc}"))
            return
        post(PlanComputed(path, request, result, note=note, speed=speed))

    def watch_speed(self, path: str, request: int, result: FitResult | None, speed: SpeedPrediction | None) -> None:
        """While the plan's speed reads "measuring…" (other programs kept the CPUs busy), ask again once the
        probe may run again (app.speed.machine.RETRY_SECONDS)."""
        from planner.speed import PENDING

        if self._speed_timer is not None:
            self._speed_timer.stop()
            self._speed_timer = None
        if result is None or speed is None or speed.decode_start.basis != PENDING:
            return
        from app.speed.machine import RETRY_SECONDS

        plan = result.plan
        ask = partial(self._run, partial(self._ask_speed, path, request, plan), "_ask_speed", "plan-speed")
        self._speed_timer = self.screen.set_timer(RETRY_SECONDS + 1, ask)

    def _ask_speed(self, path: str, request: int, plan: MemoryPlan) -> None:
        from app.speed import plan_speed

        report = self.services.devices or self.services.probe_devices()
        self.screen.post_message(SpeedAsked(path, request, plan_speed(plan, report.gpus)))

    # -- estimated rows, checked by llama.cpp in the background ----------------------------------

    def queue_checks(self, entries: list[CatalogEntry], again: bool = False) -> None:
        """Rows whose plan is an estimate go to llama.cpp's dry run, one at a time, in a worker (and
        in an engine process); on simulated devices there is nothing real to check against. `again`:
        rows the cache already has checked too (the selected one, for the plan llama.cpp confirmed)."""
        from dataclasses import replace

        from app.estimate_check import needs_check

        report = self.services.devices
        if report is None or report.simulated:
            return
        for entry in entries:
            summary = replace(entry.summary, checked=False) if again and entry.summary else entry.summary
            if entry.fresh and needs_check(summary) and entry.file.entry_id not in self.checks_asked:
                self.checks_asked.add(entry.file.entry_id)
                self.checks_queued.append(entry)
        if self.checks_queued and not self.checking:
            self.checking = True
            batch, self.checks_queued = self.checks_queued, []
            self._run(partial(self._check_estimates, batch), "_check_estimates", "check", exclusive=False)

    def checks_done(self) -> None:
        """The last batch of checks ended (ChecksDone): the rows queued while it ran go next."""
        self.checking = False
        self.queue_checks([])

    def stop_checks(self) -> None:
        """No dry-run engine beside a model being loaded."""
        self.screen.workers.cancel_group(self.screen, "check")

    def _check_estimates(self, entries: list[CatalogEntry]) -> None:
        from app.estimate_check import check_summary

        worker = get_current_worker()
        report = self.services.devices
        runner, close = self.services.dry_runner()
        catalog = Catalog(report.gpus, report.host, self.services.plan_cache) if report else None
        try:
            for entry in entries:
                if worker.is_cancelled or catalog is None or entry.summary is None:
                    break
                checked = check_summary(runner, entry.file.path, entry.summary, catalog.gpus, catalog.host)
                if checked is None:
                    continue
                summary, result = checked
                catalog.cache.put(entry.key, catalog.fingerprint, summary)
                catalog.cache.save()  # on disk before the badge says "checked": a quit right after keeps it
                self.screen.post_message(EstimateChecked(CatalogEntry(entry.file, summary, fresh=True), result))
        finally:
            close()
            self.screen.post_message(ChecksDone())
