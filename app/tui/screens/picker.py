"""The model picker: every GGUF found, with a fit badge; the selected model's plan, with knobs.

The list is app/tui/widgets/model_table.py, the knobs and the plan app/tui/widgets/plan_panel.py. The
scan, the plans and llama.cpp's checks run in thread workers (app/tui/screens/picker_controller.py) that
post messages; the list shows cached summaries at once and fills in the rest as they are planned.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events, getters, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widgets import Button, DataTable, Header, Input, Select, Static
from textual.worker import Worker, WorkerState

from app.catalog import CatalogEntry
from app.planning import PlanChoice, beyond_fields, choice_fields, parse_choice, with_fields
from app.terminal_text import terminal_safe
from app.tui import bench_hook
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
from app.tui.model_load import load_or_ask, refused_for_chat
from app.tui.named_model import NamedModel
from app.tui.screens.dialog_host import DialogHost
from app.tui.screens.picker_controller import DEMO_STATUS, PickerController
from app.tui.while_running import while_running
from app.tui.widgets.footer import AdaptiveFooter
from app.tui.widgets.model_table import ModelTable, first_readable
from app.tui.widgets.plan_panel import PlanPanel, empty_help, plan_verdict
from app.tui.widgets.status_bar import StatusBar
from planner.errors import PlannerError

PLAN_DEBOUNCE = 0.2


if TYPE_CHECKING:  # the planner itself is imported by the plan worker, after the list is drawn
    from app.tui.services import Services
    from planner.fit import FitResult
    from planner.speed import SpeedPrediction


class PickerScreen(DialogHost):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+l", "load", "Load"),
        Binding("f2", "app.show_chat", "Chat"),
        Binding("f5", "rescan", "Rescan"),
        Binding("f6", "rpc_servers", "RPC"),
        Binding("f7", "app.hub", "Hub"),
        Binding("delete", "delete_model", "Delete", show=False),  # F1 and the palette list it
        Binding("escape", "focus_table", "Model list", show=False),
    ]

    # the panes, typed
    device_line = getters.query_one("#device-line", Static)
    device_warnings = getters.query_one("#device-warnings", Static)
    scan_bar = getters.query_one("#scan-bar", StatusBar)
    models = getters.query_one("#models", ModelTable)
    panel = getters.query_one("#plan-area", PlanPanel)

    def __init__(
        self,
        services: Services,
        preselect: str | None = None,
        autoload: bool = False,
        preselect_source: str = "command line",
    ) -> None:
        super().__init__(id="picker")
        self.services = services
        self.work = PickerController(self, services)
        self.named = NamedModel(preselect, preselect_source, autoload)  # selected first, as the command line said
        # the command line's whole choice while its model stays selected (the fields hold four of its knobs)
        self._carried: PlanChoice | None = None
        self.selected: str | None = None
        self.result: FitResult | None = None
        self.speed: SpeedPrediction | None = None
        self.plan_state = "none"  # none, pending, ready, error
        self._request = 0
        self._debounce: Timer | None = None
        self._plan_note = ""  # the shown plan's projector note (the verdict is drawn again with a new speed)
        self._scanning = False
        self._load_when_ready = False  # Enter (or Ctrl+L) came before the plan: load when it comes
        self.checked_fits: dict[str, FitResult] = {}  # the default plan llama.cpp confirmed, per path
        self._rescan_when_done = False  # a download finished during a scan
        self._asked: tuple[tuple[str, str, str, str], bool] | None = None  # the knobs of the last plan asked

    @property
    def entries(self) -> dict[str, CatalogEntry]:
        """The models listed, by their key in the list (`CatalogEntry.file.entry_id`)."""
        return self.models.entries

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Probing devices…", id="device-line", markup=False)
        yield Static("", id="device-warnings", markup=False)
        yield StatusBar("scan", "Looking for models…")
        yield ModelTable()
        yield PlanPanel()
        yield AdaptiveFooter()

    async def on_mount(self) -> None:
        self.models.lay_out(self.app.size.width, self.selected)
        self.models.focus()  # keys typed at once go to the list
        self.device_warnings.display = False
        self.rescan()
        # the list in the first frame when the scan is quick (a warm plan cache: 50 ms for 100 models here):
        # its messages are then handled before that frame is drawn
        await self.work.wait_for_list()
        # the knobs after that frame, behind what the list asked to be done after it (its plan, its mark):
        # queued behind the scan's messages, so asked after theirs
        self.call_later(self.call_after_refresh, self.panel.mount_knobs)

    def on_resize(self, event: events.Resize) -> None:
        self.models.lay_out(event.size.width, self.selected)

    # -- scanning -------------------------------------------------------------------------------

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
        self.scan_bar.display = True
        self.scan_bar.working()
        self.work.scan(self.named.path, self.named.source)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "scan" and event.state == WorkerState.ERROR:
            self._scanning = False
            self.scan_bar.say("Looking for models failed (see the notification)")
            self.scan_bar.idle()
        if event.state == WorkerState.ERROR:
            self.services.report_worker_error(event.worker)

    @while_running
    def on_scan_status(self, message: ScanStatus) -> None:
        self.scan_bar.say(message.text)
        if message.total:
            self.scan_bar.progressed(message.done, message.total)

    @while_running
    def on_devices_probed(self, message: DevicesProbed) -> None:
        if message.report is None:
            self._scanning = False
            self.device_line.update(terminal_safe(f"Device settings are wrong: {message.error}"))
            self.scan_bar.say("Nothing planned: no devices to plan for until the device settings are mended")
            self.scan_bar.idle()  # no longer probing: the bar stops
            self._load_when_ready = False  # a Load pressed while it probed: nothing will be planned to load
            self.app.notify(message.error, title="Devices", severity="error", timeout=10)
            return
        from app.devices.render import device_line  # the scan worker imported the probes already

        report = message.report
        self.services.devices = report  # here, on the UI thread: the scan worker only posts it
        self.device_line.update(terminal_safe(device_line(report)))
        self.device_warnings.update("\n".join(f"⚠ {terminal_safe(w)}" for w in report.warnings))
        self.device_warnings.display = bool(report.warnings)

    @while_running
    def on_scan_listed(self, message: ScanListed) -> None:
        self._first_start_in_hub(message.entries)
        self.models.show(message.entries)
        if not message.entries:
            self.panel.show_words(
                f"{DEMO_STATUS.capitalize()}: it is listed here when it is ready."
                if message.demo_pending
                else empty_help()
            )
            bench_hook.mark(self, "listed")
            return
        target = self.named.key_in(self.entries) or first_readable(message.entries)
        self.models.point_at(target)
        bench_hook.mark(self, "listed")
        # the list first: the selected model is planned once the frame that shows the list is drawn
        self.select(target, plan_after_refresh=True)
        self.models.focus()
        self._load_when_ready |= self.models.play_early_keys()
        self.call_after_refresh(self.work.queue_checks, message.entries)

    @while_running
    def on_entries_added(self, message: EntriesAdded) -> None:
        was_empty = not self.entries
        self.models.add(message.entries)
        if was_empty and self.entries:
            self.select(next(iter(self.entries)), plan_after_refresh=True)
            self.models.focus()
            self._load_when_ready |= self.models.play_early_keys()

    @while_running
    def on_entries_planned(self, message: EntriesPlanned) -> None:
        self.models.update(message.entries)
        self.scan_bar.say(message.status)
        self.scan_bar.progressed(message.done, message.total)
        self.work.queue_checks(message.entries)

    @while_running
    def on_estimate_checked(self, message: EstimateChecked) -> None:
        entry = message.entry
        path = entry.file.entry_id
        if path not in self.entries:
            return  # rescanned since
        self.checked_fits[path] = message.result
        self.models.update([entry])
        if path == self.selected:
            # the plan shown becomes the one llama.cpp checked; a plan in flight may have started before
            # the check ended: it is superseded (its answer is dropped as stale)
            self.request_plan(now=True)

    @while_running
    def on_checks_done(self, message: ChecksDone) -> None:
        self.work.checks_done()

    @while_running
    def on_scan_finished(self, message: ScanFinished) -> None:
        self._scanning = False
        if self._rescan_when_done:
            self._rescan_when_done = False
            self.rescan()
            return
        self.scan_bar.display = False
        count = len(self.entries)
        self.sub_title = f"{count} model{'s' if count != 1 else ''}"
        if not self.entries:
            self.panel.show_words(empty_help())

    def _first_start_in_hub(self, entries: list[CatalogEntry]) -> None:
        """A first start with no models of the user's own (the demo at most) opens the hub view, once."""
        settings = self.services.settings
        if not settings.hub_on_first_start or self.named.path or any(not e.file.is_demo for e in entries):
            return
        # the hub view says whether the hub answered: offline, it hands back to this list (the demo is
        # here) and the next start tries again
        self.call_later(self.run_action, "app.hub_landing")

    def show_downloaded(self, path: str) -> None:
        """A model just downloaded: listed (a new scan), selected and planned, ready to load."""
        self.named.rename(path, "downloaded")
        if self._scanning:
            self._rescan_when_done = True
        else:
            self.rescan()

    # -- the plan of the selected model ---------------------------------------------------------

    @on(DataTable.RowHighlighted, "#models")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and event.row_key.value != self.selected:
            self.select(event.row_key.value)

    @on(DataTable.RowSelected, "#models")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value == self.selected:
            self.action_load()

    def select(self, path: str, plan_after_refresh: bool = False) -> None:
        self.selected = path
        self.result = None
        self._carried = self.named.knobs_for(path, self.entries, self.services.options.choice)
        entry = self.entries.get(path)
        # the fields set for the selection post no change: it is planned once, below
        self.panel.choose(
            *choice_fields(self._carried or PlanChoice()), vision=entry is not None and bool(entry.file.projectors)
        )
        if plan_after_refresh:
            self.plan_state = "pending"
            self.call_after_refresh(self.request_plan, True)
        else:
            self.request_plan(now=True)
        entry = self.entries.get(path)
        if entry is not None and entry.summary is not None and entry.summary.checked and path not in self.checked_fits:
            # checked at an earlier start (the badge comes from the cache): the plan shown is llama.cpp's too
            self.call_after_refresh(self.work.queue_checks, [entry], True)

    @on(Input.Changed, "#ctx, #ngl")
    @on(Select.Changed, "#kv, #fa, #vision")
    def _knob_changed(self) -> None:
        # the knobs say their first values as they mount (after the first frame, a model perhaps selected and
        # planned by then): a knob that says what was planned asks nothing (nor a plan twice for one selection)
        if self.selected is not None and self._knobs_now() != self._asked:
            self.request_plan()

    def _knobs_now(self) -> tuple[tuple[str, str, str, str], bool]:
        return self.panel.fields(), self.panel.vision_on

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
        fields = parse_choice(*self.panel.fields())
        return fields if self._carried is None else with_fields(self._carried, fields)

    def _start_plan(self) -> None:
        path = self.selected
        report = self.services.devices
        if path is None or report is None:
            return
        entry = self.entries.get(path)
        self._request += 1
        self._asked = self._knobs_now()
        self.panel.disable_load()
        if entry is not None and entry.file.problem:
            self._show_error(entry.file.problem)
            return
        try:
            choice = self._choice()
        except PlannerError as exc:
            self._show_error(str(exc))
            return
        self.plan_state = "pending"
        self.panel.show_planning()
        vision = entry is not None and bool(entry.file.projectors) and self.panel.vision_on
        projectors = list(entry.file.projectors) if entry is not None and vision else []
        options = self.services.options
        if self._carried is not None and options.mmproj:  # --mmproj for the model it names
            projectors = [options.mmproj]
        self.work.plan(
            path,
            choice,
            self._request,
            projectors,
            entry.file.path if entry is not None else path,
            anatomy=options.anatomy if self.named.is_entry(path, self.entries) else None,
            checked=self.checked_fits.get(path) if choice.is_default else None,
        )

    @while_running
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
        self.work.watch_speed(self.selected or "", self._request, self.result, self.speed)
        if self._load_when_ready:
            self._load_when_ready = False
            self.action_load()
            return
        if self.named.autoload and self.named.is_entry(message.path, self.entries):
            self.named.autoload = False  # `vramchat MODEL`: load it when the plan fits
            if message.result.plan.fits:
                self.action_load()
            else:
                self.app.notify(
                    "The plan does not fit: change the settings, or load anyway.",
                    title="Not loaded",
                    severity="warning",
                    timeout=8,
                )

    @while_running
    def on_speed_asked(self, message: SpeedAsked) -> None:
        if message.request != self._request or message.path != self.selected or self.result is None:
            return
        self.speed = message.speed
        self._show_plan(self.result, self._plan_note)
        self.work.watch_speed(self.selected or "", self._request, self.result, self.speed)

    def _show_error(self, error: str) -> None:
        self.result = None
        self.plan_state = "error"
        self.panel.show_error(error)

    def _show_plan(self, result: FitResult, note: str = "") -> None:
        entry = self.entries.get(self.selected or "")
        checked = entry is not None and entry.summary is not None and entry.summary.checked
        verdict = plan_verdict(
            result,
            self.app.current_theme,
            entry,
            carried=beyond_fields(self._carried) if self._carried is not None else [],
            speed=self.speed,
            note=note,
            checked=checked and result is self.checked_fits.get(self.selected or ""),
        )
        self.panel.show_plan(result, verdict)

    # -- loading --------------------------------------------------------------------------------

    @on(Button.Pressed, "#load")
    def _load_pressed(self) -> None:
        self.action_load()

    def action_load(self) -> None:
        path, result = self.selected, self.result
        if path is None or result is None:
            if self.services.devices is None and not self._scanning:  # the probe failed: no plan will come
                self.app.notify(
                    "Nothing can be loaded until the device settings are mended (the line at the top says why).",
                    title="Devices",
                    severity="warning",
                )
                return
            if self.plan_state == "pending" or (self._scanning and not self.entries):
                # pressed before the list or the plan was ready (a first start takes a moment): kept
                self._load_when_ready = True
                self.app.notify("Loading as soon as the plan is ready…", timeout=3)
                return
            self.app.notify("Select a model whose plan is ready first.", severity="warning")
            return
        anatomy = self.work.anatomies.get(path)
        if anatomy is None or refused_for_chat(self.app, self.model_name(path), anatomy):
            return
        entry = self.entries.get(path)
        model_file = entry.file.path if entry is not None else path  # the list's key may be Ollama's manifest
        self.work.stop_checks()  # no dry-run engine beside the model being loaded
        load_or_ask(self, result, lambda: self.post_message(LoadRequested(model_file, anatomy, result)))

    def action_focus_table(self) -> None:
        self.models.focus()

    def action_delete_model(self) -> None:
        """Delete: the selected model, when vramchat downloaded it (app/tui/model_delete.py asks first)."""
        from app.tui.model_delete import ask_to_delete

        ask_to_delete(self)

    def forget(self, path: str) -> None:
        """A model deleted from the disk leaves the list; the row that takes its place is selected."""
        row = self.models.forget(path)
        self.work.anatomies.pop(path, None)
        if not self.entries:
            self.selected, self.result = None, None
            self.panel.show_words(empty_help(), verdict="")
            self.panel.disable_load()
            return
        table = self.models
        row = min(row, table.row_count - 1)
        table.move_cursor(row=row)
        self.select(str(table.ordered_rows[row].key.value))

    def model_name(self, path: str) -> str:
        entry = self.entries.get(path)
        return entry.name if entry else terminal_safe(Path(path).name)
