"""The memory dashboard on its own screen: larger graphs, and planned vs actual per buffer."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Header, Static

from app.engine.planned_actual import per_buffer
from app.tui.widgets.buffers import BufferTable
from app.tui.widgets.dashboard import Dashboard
from app.tui.widgets.footer import AdaptiveFooter
from planner.explain import headline
from planner.hardware import format_size

if TYPE_CHECKING:
    from app.tui.services import Services


class DashboardScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f3", "app.pop_screen", "Back")]

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="dash-body"):
            yield Dashboard(self.services.started_session, id="dash-graphs", classes="full")
            with Vertical(id="dash-side"):
                yield Static("", id="dash-model", markup=False)
                yield BufferTable(id="buffers")
                yield Static("", id="dash-note", markup=False)
        yield AdaptiveFooter()

    def on_mount(self) -> None:
        self.sub_title = "memory"
        self.query_one("#dash-graphs").border_title = "Live"
        self.query_one("#buffers").border_title = "Planned, dry run and actual, per buffer"
        session = self.services.started_session()
        model = session.model if session is not None else None
        table = self.query_one(BufferTable)
        if model is None:
            self.query_one("#dash-model", Static).update("No model loaded.")
            table.fill(per_buffer([], None))
            return
        plan = model.plan
        self.query_one("#dash-model", Static).update(
            f"{model.name} · {headline(plan)} · loaded in {model.report.seconds:.1f} s"
        )
        now = model.now  # the plan for the context held now (it grows towards `plan`)
        dry = model.verification if now is plan else None
        table.fill(per_buffer(now.buffers, model.report.measurements, dry))
        devices = self.services.devices
        notes = ["Actual sizes are read from llama.cpp's log (0.01 MiB precision)."]
        if model.n_ctx < model.max_ctx:
            notes.append(
                f"The context grows with the conversation: {model.n_ctx:,} tokens committed now, up to "
                f"{model.max_ctx:,} (planned and reserved). The table is for what is allocated now."
            )
        if model.verification is not None:
            v = model.verification
            agreed = "every figure agreed with the plan" if v.verified else v.differences()
            notes.append(
                f"Dry run: llama.cpp sized the buffers of the {model.max_ctx:,}-token plan without "
                f"allocating, before the load ({v.seconds:.2f} s); {agreed}."
            )
        if devices is not None and devices.simulated:
            notes.append(
                "Devices are simulated: a GPU in the plan is not really used; llama.cpp puts what it "
                "cannot place on a GPU on the CPU."
            )
        for d in plan.gpus:
            if d.overhead and d.overhead_detail is not None:
                notes.append(
                    f"{d.name} backend overhead ({format_size(d.overhead)}), no buffer: {d.overhead_detail.source}."
                )
        self.query_one("#dash-note", Static).update("\n".join(notes))
