"""The memory dashboard: the runway, a memory map per device and plots with axes, from the
session's telemetry, redrawn at 2 Hz.

The panel pulls `Telemetry.history()` on a UI timer; the sampler thread never touches it. It
draws nothing while it is not shown (the chat's panel hidden, another screen on top), and a
plot is drawn again only when a point moves to another pixel (app.tui.widgets.time_plot).
Plots come in order of need: device memory (one per device), the KV cache, tokens per second,
then the compute arena and the engine's RSS, which only the full screen draws (and not on a
short terminal): every plot in view costs layout work each time the streaming reply grows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from app.memory_words import (
    ALLOCATED,
    COMMITTED,
    IN_USE,
    MEANING,
    OTHER_PROGRAMS,
    OTHERS_AND_PLANNED,
    OTHERS_AND_PLANNED_SHORT,
    OTHERS_AT_LOAD,
    OTHERS_AT_LOAD_SHORT,
    PLANNED,
    PLANNED_MAX,
)
from app.telemetry import Sample
from app.telemetry.memory_map import WORDS, device_maps
from app.telemetry.runway import reachable_context, runway
from app.tui.widgets.axes import RateFormatter
from app.tui.widgets.memory_bar import MemoryBar, device_title
from app.tui.widgets.time_plot import Line, TimePlot
from planner.hardware import HOST, GiB, MiB, format_size

if TYPE_CHECKING:
    from app.session import LoadedModel, ModelSession
    from planner.memory import DeviceUsage

REFRESH_SECONDS = 0.5
WINDOW_SECONDS = 120.0  # the time axis of the side panel's plots
FULL_WINDOW_SECONDS = 300.0  # and of the full screen's

HELP = {
    "kv": f"{IN_USE}: {WORDS['kv_in_use'][1]}; {COMMITTED}: {MEANING[COMMITTED]}; "
    f"{PLANNED_MAX}: {MEANING[PLANNED_MAX]}",
    "compute": WORDS["compute"][1],
    "rss": "the engine process's resident memory, as the system counts it (mapped weights it has read included)",
    "tps": "tokens the model writes per second while it replies",
}


def size_text(n: float) -> str:
    """Sizes to the precision a glance needs: whole MiB from 100 MiB up, so that a figure that
    jitters by a few KiB does not repaint the legend twice a second."""
    if 100 * MiB <= n < GiB:
        return f"{n / MiB:.0f} MiB"
    return format_size(int(n))


class AlarmLine(Static):
    """One line of status that takes no room while it is empty (the drift alarm's place)."""

    def on_mount(self) -> None:
        self.display = bool(str(self.render()))

    def say(self, text: str) -> None:
        """Show `text` (hide the line when empty); the same text again changes nothing (an update
        lays the screen out anew)."""
        if text == getattr(self, "_said", None):
            return
        self._said = text
        self.update(text)
        self.display = bool(text)


class Dashboard(VerticalScroll):
    """Runway, memory maps and plots; `full` (the F3 screen) draws a longer time axis."""

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
            "No model loaded: the graphs start when a model is loaded.",
            id="dash-status",
            classes="dash-status",
            markup=False,
        )
        # the drift alarm (app.telemetry.drift), when one is raised
        yield AlarmLine("", id="dash-drift", classes="dash-drift", markup=False)
        yield Static("", id="runway", classes="dash-runway", markup=False)
        yield AlarmLine("", id="runway-warning", classes="dash-warning", markup=False)
        yield Vertical(id="maps")
        with Vertical(id="plots"):
            yield TimePlot("KV cache", id="p-kv", classes="plot", help=HELP["kv"])
            yield TimePlot("Tokens/s", RateFormatter(), id="p-tps", classes="plot", help=HELP["tps"])
            yield TimePlot("Compute arena", id="p-compute", classes="plot optional", help=HELP["compute"])
            yield TimePlot("Engine RSS", id="p-rss", classes="plot optional", help=HELP["rss"])

    def on_mount(self) -> None:
        self._device_plots: dict[str, TimePlot] = {}
        self._maps: dict[str, MemoryBar] = {}
        self._shown: Sample | None = None
        self._mounted_since = False
        self._status = ""
        self.refresh_from_session()
        self.set_interval(REFRESH_SECONDS, self.refresh_from_session)

    def has_drawn(self, sample: Sample) -> bool:
        """Whether `sample` is the latest drawn, in every plot (one mounted since waits for the
        next refresh, one drawn less than a second ago for its timer)."""
        plots = self.query(TimePlot)
        return self._shown is sample and not self._mounted_since and not any(p.waiting for p in plots)

    @property
    def window(self) -> float:
        return FULL_WINDOW_SECONDS if self.has_class("full") else WINDOW_SECONDS

    def refresh_from_session(self) -> None:
        if not self.display or not self.screen.is_current:
            return  # nothing is drawn that nobody sees: a hidden panel costs nothing
        session = self._session()
        telemetry = session.telemetry if session is not None else None
        model = session.model if session is not None else None
        if telemetry is None or model is None:
            return
        latest = telemetry.latest()
        if latest is None or (latest is self._shown and not self._mounted_since):
            return  # nothing new (and no plot mounted since the last drawing that waits for it)
        self._shown = latest
        self.show(telemetry.history(), model, session)

    def show(
        self, history: list[Sample], model: LoadedModel | None = None, session: ModelSession | None = None
    ) -> None:
        """Draw these samples (oldest first), for `model` (its plans) when there is one. A plot
        mounted now (a device seen for the first time) is drawn at the next refresh."""
        self._mounted_since = False
        last = history[-1]
        state = "a reply is streaming" if last.generating else "idle"
        status_text = f"Live, every {REFRESH_SECONDS:g} s · {state}"
        if status_text != self._status:
            self._status = status_text
            self.query_one("#dash-status", Static).update(status_text)
        drift = session.drift if session is not None else None
        self.query_one("#dash-drift", AlarmLine).say(drift.line if drift is not None else "")
        if model is not None:
            self._show_runway(last, model, session)
            self._show_maps(last, model)
        self._show_plots(history, model, session)

    # -- runway and maps -------------------------------------------------------------------------

    def _show_runway(self, last: Sample, model: LoadedModel, session: ModelSession | None) -> None:
        free = {name: max(total - used, 0) for name, (used, total) in last.devices.items()}
        elastic = session.elastic if session is not None else model.n_ctx < model.max_ctx
        reachable = reachable_context(model.plan, model.now, model.n_ctx, free, model.max_ctx)
        pace = session.pace.per_turn if session is not None else None
        way = runway(last.kv_cells_used, model.n_ctx, model.max_ctx, pace, reachable, elastic)
        self.runway = way
        text = " ".join(way.sentences())
        runway_line = self.query_one("#runway", Static)
        if str(runway_line.render()) != text:
            runway_line.update(text)
        self.query_one("#runway-warning", AlarmLine).say(way.warning)

    def _show_maps(self, last: Sample, model: LoadedModel) -> None:
        maps = device_maps(model.plan, model.now, last.devices, last.kv_cells_used)
        box = self.query_one("#maps", Vertical)
        names = [m.name for m in maps]
        for gone in [name for name in self._maps if name not in names]:
            self._maps.pop(gone).remove()
        for device_map in maps:
            bar = self._maps.get(device_map.name)
            if bar is None:
                bar = self._maps[device_map.name] = MemoryBar(classes="memory-map")
                box.mount(bar)
            bar.show(device_map)

    # -- plots -----------------------------------------------------------------------------------

    def _device_plot(self, name: str, unread: bool) -> TimePlot:
        plot = self._device_plots.get(name)
        if plot is None:
            title = device_title(name) if name == HOST or name.startswith("RPC") else f"{name} memory"
            plot = TimePlot(title, id=None, classes="plot device-plot", help=_device_help(name, unread))
            self._device_plots[name] = plot
            self.query_one("#plots", Vertical).mount(plot, before=self.query_one("#p-kv"))
        return plot

    def _show_plots(self, history: list[Sample], model: LoadedModel | None, session: ModelSession | None) -> None:
        last = history[-1]
        now = last.t
        times = [s.t for s in history]
        window = self.window
        active = last.generating

        def visible(plot: TimePlot) -> bool:
            if not plot.is_mounted:
                self._mounted_since = True  # mounted only now: drawn at the next refresh
                return False
            return plot.display

        for gone in [name for name in self._device_plots if name not in last.devices]:
            self._device_plots.pop(gone).remove()  # a device the model no longer uses (an RPC server left out)
        for name, (_used, total) in last.devices.items():
            unread = name in last.unread  # no live figure from the driver: llama.cpp's buffers stand for it
            plot = self._device_plot(name, unread)
            if not visible(plot):
                continue
            series = [s.devices.get(name, (0, 0))[0] for s in history]
            usage = _usage(model, name) if model is not None else None
            lines = device_lines(series, usage, unread)
            plot.title = f"{device_title(name) if name == HOST else name + ' memory'} · {size_text(total)}"
            plot.show(times, now, lines, total, window, [0, total / 2, total], active)

        kv = self.query_one("#p-kv", TimePlot)
        if visible(kv):
            kv_top = max(last.kv_maximum, last.kv_allocated, 1)
            lines = [
                Line(IN_USE, [s.kv_used for s in history], "measured", size_text(last.kv_used)),
                Line(COMMITTED, [s.kv_allocated for s in history], "committed", size_text(last.kv_allocated)),
            ]
            if last.kv_maximum > last.kv_allocated:  # the context grows with the conversation
                lines.append(Line(PLANNED_MAX, [s.kv_maximum for s in history], "planned", size_text(kv_top)))
            else:
                planned_kv = _planned_kv(model, kv_top)
                lines.append(Line(PLANNED, [planned_kv] * len(history), "planned", size_text(planned_kv)))
            kv.show(times, now, lines, kv_top * 1.15, window, active=active)

        tps = self.query_one("#p-tps", TimePlot)
        if visible(tps):
            speeds = [s.tokens_per_second for s in history]
            stats = session.engine.last_stats if session is not None and model is not None else None
            recent = stats.tokens_per_second if stats is not None else 0.0
            lines = [Line("now", speeds, "measured", f"{last.tokens_per_second:.1f}")]
            if recent:
                lines.append(Line("last reply", [recent] * len(history), "committed", f"{recent:.1f}"))
            tps.show(times, now, lines, max(max(speeds), recent, 1.0) * 1.25, window, active=active)

        compute = self.query_one("#p-compute", TimePlot)
        if visible(compute):
            measured = [float(sum(s.compute.values())) for s in history]
            planned_compute = float(_planned_of(model, "compute")) if model is not None else measured[-1]
            lines = [
                Line(PLANNED, [planned_compute] * len(history), "planned", size_text(planned_compute)),
                Line(ALLOCATED, measured, "measured", size_text(measured[-1])),
            ]
            compute_top = max(
                max(measured), planned_compute, _planned_of(model, "compute", maximum=True) if model else 0.0, 1.0
            )
            compute.show(times, now, lines, compute_top * 1.25, window, active=active)

        rss = self.query_one("#p-rss", TimePlot)
        if visible(rss):
            rss_seen = [float(s.rss) for s in history]
            lines = [Line("RSS", rss_seen, "measured", size_text(last.rss))]
            rss_top = max(rss_seen)
            if model is not None:
                host = float(model.now.host.planned)
                lines.insert(0, Line(f"host buffers {PLANNED}", [host] * len(history), "planned", size_text(host)))
                rss_top = max(rss_top, host)
            rss.show(times, now, lines, max(rss_top, 1.0) * 1.25, window, active=active)


def device_lines(series: list[int], usage: DeviceUsage | None, unread: bool) -> list[Line]:
    """A device's plot: what is in use on it (every program's) beside what would be if the plan were
    exact: other programs' memory at the load, and this model's planned memory on top of it. A device
    read from llama.cpp's buffers alone (`unread`) shows this model's allocated beside its planned."""
    now = series[-1]
    if unread:
        lines = [Line(ALLOCATED, series, "measured", size_text(now))]
    else:
        lines = [Line(IN_USE, series, "measured", size_text(now))]
    if usage is None:
        return lines
    planned = usage.planned - usage.weights_mapped  # mapped weights sit in the file cache, not counted as used
    if unread:  # the driver's own share cannot be seen there
        planned -= usage.overhead
        return [Line(PLANNED, [planned] * len(series), "planned", size_text(planned)), *lines]
    others = usage.total - usage.free
    return [
        Line(OTHERS_AT_LOAD, [others] * len(series), "committed", size_text(others), OTHERS_AT_LOAD_SHORT),
        Line(
            OTHERS_AND_PLANNED,
            [others + planned] * len(series),
            "planned",
            size_text(others + planned),
            OTHERS_AND_PLANNED_SHORT,
        ),
        *lines,
    ]


def _usage(model: LoadedModel, name: str) -> DeviceUsage | None:
    return next((d for d in [*model.now.gpus, model.now.host] if d.name == name), None)


def _planned_of(model: LoadedModel, kind: str, maximum: bool = False) -> int:
    plan = model.plan if maximum else model.now
    return sum(b.bytes for b in plan.buffers if b.kind == kind)


def _planned_kv(model: LoadedModel | None, measured: int) -> int:
    if model is None:
        return measured
    return sum(b.bytes for b in model.now.buffers if b.kind in ("kv", "kv_swa")) or measured


def _device_help(name: str, unread: bool = False) -> str:
    where = "host RAM on this machine" if name == HOST else f"memory on {name}"
    if unread:
        return f"{where}: {ALLOCATED}, {MEANING[ALLOCATED]}; {PLANNED}, {MEANING[PLANNED]}"
    return (
        f"{where}: {IN_USE}, every program's; {OTHERS_AT_LOAD}: {MEANING[OTHER_PROGRAMS]}, when the model was planned; "
        f"{OTHERS_AND_PLANNED}: what in use would be if the plan were exact ({PLANNED}: {MEANING[PLANNED]})"
    )
