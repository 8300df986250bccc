"""The memory dashboard on its own screen: the runway, a memory map per device, the plots, and
planned vs allocated per buffer with llama.cpp's dry run beside them.

From 100 columns the plots stand two abreast, from 150 beside the table; below 150 everything is
one column that scrolls, the table's planned, allocated and difference columns first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from app.engine.planned_actual import per_buffer
from app.memory_words import ALLOCATED, MEANING, PLANNED
from app.tui.widgets.buffers import AGREED, BufferTable
from app.tui.widgets.dashboard import Dashboard
from app.tui.widgets.footer import AdaptiveFooter
from app.tui.widgets.server_panel import ServerPanel
from planner.explain import headline
from planner.hardware import format_size

if TYPE_CHECKING:
    from app.session import LoadedModel
    from app.tui.services import Services


def notes_for(model: LoadedModel, simulated: bool) -> list[str]:
    """What the table's figures are, in sentences."""
    plan = model.plan
    notes = [f"Planned: {MEANING[PLANNED]}. Allocated: {MEANING[ALLOCATED]}, to 0.01 MiB; = equal to that precision."]
    if model.n_ctx < model.max_ctx:
        notes.append(
            f"The context grows with the conversation: {model.n_ctx:,} tokens committed now, up to "
            f"{model.max_ctx:,} (planned and reserved). Planned and allocated are for the context held now."
        )
    if model.verification is not None:
        v = model.verification
        agreed = "every figure agreed with the plan" if v.verified else v.differences()
        notes.append(
            f"Dry run: before the load llama.cpp sized the buffers of the {model.max_ctx:,}-token plan "
            f"without allocating them ({v.seconds:.2f} s): {agreed}. {AGREED} agreed with the plan's figure "
            "at that size, ≠ differed (the plan took llama.cpp's figure); weights show -: the dry run "
            "reads none."
        )
    if simulated:
        notes.append(
            "Devices are simulated: a GPU in the plan is not really used; llama.cpp puts what it "
            "cannot place on a GPU on the CPU."
        )
    for d in plan.gpus:
        if d.overhead and d.overhead_detail is not None:
            notes.append(
                f"{d.name} backend overhead ({format_size(d.overhead)}), no buffer: {d.overhead_detail.source}."
            )
        elif d.overhead:
            notes.append(f"{d.name} backend overhead ({format_size(d.overhead)}) has no buffer.")
    return notes


class DashboardScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f3", "app.pop_screen", "Back")]

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services

    def compose(self) -> ComposeResult:
        yield Header()
        # below 150 columns the body is one column that scrolls: the page keys reach it from whatever has the
        # focus inside it (a part that cannot scroll itself passes them on)
        with ScrollableContainer(id="dash-body", can_focus=False):
            yield Dashboard(self.services.started_session, id="dash-graphs", classes="full")
            with VerticalScroll(id="dash-side"):
                yield ServerPanel(
                    lambda: getattr(self.app, "serving", None), self.services.started_session, id="dash-server"
                )
                yield Static("", id="dash-model", markup=False)
                yield BufferTable(id="buffers")
                yield Static("", id="dash-note", markup=False)
        yield AdaptiveFooter()

    def on_mount(self) -> None:
        self.sub_title = "memory"
        self.query_one("#dash-graphs").border_title = "Live"
        self.query_one("#buffers").border_title = "Per buffer: planned, allocated, dry run"
        self._report: object = None
        self.fill()
        self.set_interval(1.0, self.fill)  # the context may grow while the screen is open
        self.call_after_refresh(self._server_in_view)

    def _server_in_view(self) -> None:
        """Opened while the app serves (/serve's message says F3 shows the requests): in one column the server's
        panel lies below the graphs, out of sight, so the body opens scrolled to it."""
        serving = getattr(self.app, "serving", None)
        if serving is None or not serving.running or self.has_class("-wide"):
            return
        panel = self.query_one(ServerPanel)
        if panel.display:
            self.query_one("#dash-body").scroll_to_widget(panel, animate=False, top=True)

    def fill(self) -> None:
        """The model line, the table and the notes, for the load (or the context size) there is now."""
        session = self.services.started_session()
        model = session.model if session is not None else None
        table = self.query_one(BufferTable)
        if model is None:
            if self._report is not False:
                self._report = False
                self.query_one("#dash-model", Static).update("No model loaded.")
                table.fill(per_buffer([], None))
            return
        if model.report is self._report:
            return
        self._report = model.report
        self.query_one("#dash-model", Static).update(
            f"{model.name} · {headline(model.plan)} · loaded in {model.report.seconds:.1f} s"
        )
        # the plan for the context held now, beside what llama.cpp allocated; the dry run (of the
        # maximum context) beside the plan it sized
        table.fill(per_buffer(model.now.buffers, model.report.measurements, model.verification))
        devices = self.services.devices
        notes = notes_for(model, devices is not None and devices.simulated)
        self.query_one("#dash-note", Static).update("\n".join(notes))
