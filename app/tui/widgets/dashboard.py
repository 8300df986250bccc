"""The memory dashboard: live graphs from the session's telemetry, redrawn at 2 Hz.

The panel pulls `Telemetry.history()` on a UI timer; the sampler thread never
touches it. Graphs are made per device the samples name, so a machine with two
GPUs gets two device graphs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from app.devices.probes import HOST
from app.telemetry import Sample
from app.tui.widgets.memory_graph import MemoryGraph
from planner.hardware import GiB, MiB, format_size

if TYPE_CHECKING:
    from app.session import ModelSession

REFRESH_SECONDS = 0.5
MAX_POINTS = 240  # wider than any graph


def _mem(n: float) -> str:
    """Sizes to the precision a glance needs: whole MiB from 100 MiB up, so that a figure
    that jitters by a few KiB does not repaint the graph twice a second."""
    if 100 * MiB <= n < GiB:
        return f"{n / MiB:.0f} MiB"
    return format_size(int(n))


class Dashboard(VerticalScroll):
    """Graphs of device memory, RSS, compute arena, KV cache and tokens/s."""

    DEFAULT_CSS = """
    Dashboard { height: 1fr; }
    """

    def __init__(
        self, session: Callable[[], ModelSession | None], *, id: str | None = None, classes: str | None = None
    ):
        """`session()` is the model session whose telemetry is drawn (None while there is none)."""
        super().__init__(id=id, classes=classes)
        self._session = session

    def compose(self) -> ComposeResult:
        yield Static(
            "No model loaded: the graphs start when a model is loaded.", id="dash-status", classes="dash-status"
        )
        yield Static("", id="dash-drift", classes="dash-drift")  # the drift alarm (app.drift), when one is raised
        yield MemoryGraph("KV cache", _mem, id="g-kv")
        yield MemoryGraph("Compute arena", _mem, id="g-compute")
        yield MemoryGraph("Process RSS", _mem, id="g-rss")
        yield MemoryGraph("Tokens/s", lambda v: f"{v:.1f} tok/s", id="g-tps")

    def on_mount(self) -> None:
        self._device_graphs: dict[str, MemoryGraph] = {}
        self._shown: Sample | None = None
        self._status = ""
        self.refresh_from_session()
        self.set_interval(REFRESH_SECONDS, self.refresh_from_session)

    def refresh_from_session(self) -> None:
        session = self._session()
        telemetry = session.telemetry if session is not None else None
        if telemetry is None:
            return
        latest = telemetry.latest()
        if latest is None or latest is self._shown:
            return  # nothing new: no repaint (the dashboard should cost next to nothing when idle)
        self._shown = latest
        self.show(telemetry.history()[-MAX_POINTS:])

    def show(self, history: list[Sample]) -> None:
        """Draw these samples (oldest first)."""
        last = history[-1]
        state = "generating" if last.generating else "idle"
        status_text = f"Live, every {REFRESH_SECONDS:g} s · {state}"
        if status_text != self._status:
            self._status = status_text
            self.query_one("#dash-status", Static).update(status_text)
        drift = getattr(getattr(self.app, "session", None), "drift", None)
        alarm = drift.line if drift is not None else ""
        self.query_one("#dash-drift", Static).update(alarm)
        self.query_one("#dash-drift", Static).display = bool(alarm)
        for gone in [name for name in self._device_graphs if name not in last.devices]:
            self._device_graphs.pop(gone).remove()  # a device the model no longer uses (an RPC server left out)
        for name, (used, total) in last.devices.items():
            graph = self._device_graphs.get(name)
            if graph is None:
                title = "Host RAM" if name == HOST else f"{name} memory"
                if name.startswith("RPC"):  # another machine's, through an RPC server (app.devices.live)
                    title = f"{name} (remote)"
                graph = MemoryGraph(title, _mem, classes="device-graph")
                self._device_graphs[name] = graph
                self.mount(graph, before=self.query_one("#g-kv"))
            series = [s.devices.get(name, (0, 0))[0] for s in history]
            graph.update_series(series, total, f"{_mem(used)} used, {_mem(max(total - used, 0))} free")
        kv = self.query_one("#g-kv", MemoryGraph)
        caption = f"{_mem(last.kv_used)} / {_mem(last.kv_allocated)} · {last.kv_cells_used:,} cells"
        if last.kv_maximum > last.kv_allocated:  # the context grows with the conversation
            caption = f"in use {_mem(last.kv_used)} · committed {_mem(last.kv_allocated)} · max {_mem(last.kv_maximum)}"
        kv.update_series([s.kv_used for s in history], last.kv_allocated, caption)
        compute = sum(last.compute.values())
        where = ", ".join(sorted(last.compute)) or "-"
        self.query_one("#g-compute", MemoryGraph).update_series(
            [sum(s.compute.values()) for s in history], compute, f"{_mem(compute)} ({where})"
        )
        ram_total = last.devices.get(HOST, (0, 0))[1] or max(s.rss for s in history)
        self.query_one("#g-rss", MemoryGraph).update_series([s.rss for s in history], ram_total, f"{_mem(last.rss)}")
        speeds = [s.tokens_per_second for s in history]
        if last.generating:
            caption = f"{last.tokens_per_second:.1f} tok/s"
        else:
            session = self._session()
            stats = session.engine.last_stats if session is not None and session.model is not None else None
            recent = stats.tokens_per_second if stats is not None else 0.0
            caption = f"last reply {recent:.1f} tok/s" if recent else "idle"
        self.query_one("#g-tps", MemoryGraph).update_series(speeds, max(max(speeds) * 1.1, 1.0), caption)
