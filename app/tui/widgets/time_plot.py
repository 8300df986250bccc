"""A time series with axes: a legend line naming each line and its figure now, then the plot.

The plot is textual-plot's PlotWidget (braille lines on a hi-res canvas, axes with ticks): the
y-axis in the series' unit, from zero to a top the caller gives (a device's capacity, the KV
cache's maximum ...), the x-axis in seconds before now. The planned figure is a line of its own
beside the measured one. A redraw costs a few milliseconds, so `show` draws only when some
point would land on another pixel (or the axes changed): at rest, the plot is redrawn once for
each pixel the time axis moves.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.events import MouseScrollDown, MouseScrollUp
from textual.timer import Timer
from textual_hires_canvas import Canvas
from textual_plot import AxisFormatter, HiResMode, PlotWidget

from app.tui.widgets.axes import AgoFormatter, BytesFormatter
from app.tui.widgets.legend import Entry, Legend

# a line's role -> (the theme colour it is drawn in, the mark the legend shows for it)
ROLES: dict[str, tuple[str, str]] = {
    "measured": ("primary", "━━"),
    "planned": ("accent", "┅┅"),
    "committed": ("secondary", "━━"),
    "limit": ("warning", "┅┅"),
}


DASHED = ("planned", "limit")  # roles drawn as dashes, over the measured lines
DASH_CELLS = 2  # a dash and a gap are this many cells each
MIN_DRAW_SECONDS = 0.9  # a plot is drawn at most about once a second (a drawing costs milliseconds)


@dataclass(frozen=True)
class Line:
    label: str  # "used", "planned" ...
    values: Sequence[float]  # one per sample time
    role: str = "measured"  # a key of ROLES
    figure: str = ""  # the figure now, as the legend says it ("1.2 GiB")
    short: str = ""  # the label where the legend is too narrow for `label` ("others at load")


class SeriesPlot(PlotWidget, can_focus=False):
    """textual-plot's widget as a read-only view: no zoom or pan, and the mouse wheel scrolls the
    dashboard around it instead of zooming."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, allow_pan_and_zoom=False)

    def _update_margin_sizes(self) -> None:
        """textual-plot's, for a plot whose children are there: a plot removed as soon as it was mounted (a
        dashboard laid out anew while the machine is busy) has none, and its Mount must not fail the app."""
        if self.query(Grid):
            super()._update_margin_sizes()

    def _update_legend(self) -> None:
        if self.query("#legend"):  # as above: a plot whose children are gone draws no legend
            super()._update_legend()

    @on(MouseScrollDown)
    @on(MouseScrollUp)
    def _pass_scroll(self, event: MouseScrollDown | MouseScrollUp) -> None:
        event.prevent_default()  # PlotWidget's own handler would stop the event to zoom

    def on_canvas_resize(self, event: Canvas.Resize) -> None:
        """A canvas laid out anew (the y-axis margin widened, a scrollbar came): draw again at its
        size, the time axis set for the new width (the plot's owner is asked to draw again)."""
        self._needs_canvas_resize = True
        self._rerender()
        owner = self.parent
        if isinstance(owner, TimePlot):
            owner.call_after_refresh(owner.redraw)

    def text(self, canvas_id: str) -> list[str]:
        """The characters one of the plot's canvases holds, row by row (what tests read)."""
        canvas = self.query_one(f"#{canvas_id}", Canvas)
        return ["".join(row) for row in canvas._buffer]

    def _render_plot(self) -> None:
        plot = self.query_one("#plot", Canvas)
        if isinstance(self._x_formatter, AgoFormatter):  # as many time labels as this width holds
            self._x_formatter.most = max(1, (plot.size.width - 2) // 8)
        with ExitStack() as stack:  # one repaint per canvas, not one per pixel set
            for canvas in self.query(Canvas):
                stack.enter_context(canvas.batch_refresh())
            super()._render_plot()


class TimePlot(Vertical):
    """A titled time series; `show` is called from the UI thread with the samples to draw."""

    DEFAULT_CSS = """
    TimePlot { height: auto; }
    TimePlot > SeriesPlot { height: 7; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"time-plot--title"}

    def __init__(
        self,
        title: str,
        y_format: AxisFormatter | None = None,
        *,
        help: str = "",
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.y_format = y_format or BytesFormatter()
        self.x_format = AgoFormatter()
        self.lines: list[Line] = []
        self.top = 0.0
        self.draws = 0  # how many times the plot was drawn (the cost a test or a bench can see)
        self._drawn: object = None
        self._drawn_at = 0.0
        self._deferred: Timer | None = None
        self._shown_with: tuple[list[float], float, list[Line], float, float, Sequence[float] | None, bool] | None = (
            None
        )
        if help:
            self.tooltip = f"{title}: {help}"

    def compose(self) -> ComposeResult:
        yield Legend(classes="plot-legend")
        yield SeriesPlot(id="plot")

    def on_mount(self) -> None:
        if not self._still_shown():
            return  # removed as soon as mounted (a device seen for one sample): its children are gone
        plot = self.query_one(SeriesPlot)
        plot.margin_top = 0
        plot.margin_bottom = 1
        plot.set_x_formatter(self.x_format)
        plot.set_y_formatter(self.y_format)

    def show(
        self,
        times: Sequence[float],
        now: float,
        lines: Sequence[Line],
        top: float,
        window: float,
        yticks: Sequence[float] | None = None,
        active: bool = True,
    ) -> None:
        """Draw `lines` (values at `times`, on the clock `now` is read from) on a y-axis from 0 to
        `top` and an x-axis of the `window` seconds before now; `yticks` fixes the y ticks.

        The time axis moves a pixel at a time (`active`: while a reply streams), or four at rest,
        so that a plot whose points stay on their pixels is not drawn again."""
        self._shown_with = (list(times), now, list(lines), top, window, yticks, active)
        self.lines, self.top = list(lines), top
        self._legend()
        plot = self.query_one(SeriesPlot)
        inner = plot.query_one("#plot", Canvas).size
        width, height = max(inner.width - 2, 1), max(inner.height - 2, 1)
        step = window / (width * 2) * (1 if active else 4)
        reference = math.ceil(now / step) * step if step > 0 else now
        ago = [t - reference for t in times]
        key = (
            width,
            height,
            top,
            window,
            tuple(yticks or ()),
            self.app.current_theme.name,
            tuple(_pixels(ago, line.values, top, window, width * 2, height * 4) for line in lines),
        )
        if key == self._drawn:
            return
        frame = key[:6]  # the size, the axes and the theme: a change there is drawn at once
        drawn_frame = self._drawn[:6] if isinstance(self._drawn, tuple) else None
        since = time.monotonic() - self._drawn_at
        if frame == drawn_frame and since < MIN_DRAW_SECONDS:
            # new points, drawn a second after the last drawing (at most once a second); a timer
            # makes sure of it, for the sampler may have stopped (the last points must show)
            if self._deferred is None:
                self._deferred = self.set_timer(MIN_DRAW_SECONDS - since, self._draw_deferred)
            return
        if self._deferred is not None:
            self._deferred.stop()
            self._deferred = None
        self._drawn, self._drawn_at = key, time.monotonic()
        self._draw(plot, ago, lines, top, window, yticks, width, height)

    @property
    def waiting(self) -> bool:
        """Whether points shown are still to be drawn (held back by the once-a-second limit)."""
        return self._deferred is not None

    def _draw_deferred(self) -> None:
        self._deferred = None
        self.redraw()

    def redraw(self) -> None:
        """Draw the last series again (the plot's size changed, or points were held back)."""
        if self._shown_with is None or not self._still_shown():
            return
        self.show(*self._shown_with)

    def _still_shown(self) -> bool:
        """False once the plot is being removed (a device gone): a redraw asked for earlier (after a
        refresh, on a timer) finds its children already gone."""
        return self.is_attached and not self._closing and bool(self.query(SeriesPlot)) and bool(self.query(Legend))

    def _draw(
        self,
        plot: SeriesPlot,
        times: Sequence[float],
        lines: Sequence[Line],
        top: float,
        window: float,
        yticks: Sequence[float] | None,
        width: int,
        height: int,
    ) -> None:
        self.draws += 1
        self.y_format.most = max(1, height // 2)  # type: ignore[attr-defined]
        ticks = list(yticks) if yticks is not None else self.y_format.get_ticks(0, top)
        labels = self.y_format.get_labels_for_ticks(ticks)
        margin = max((len(label) for label in labels), default=1) + 2
        if plot.margin_left != margin:
            plot.margin_left = margin  # every tick label whole: PlotWidget cuts them to the margin
        theme = self.app.current_theme
        plot.clear()
        dash = window / width * DASH_CELLS  # seconds a dash of a planned line spans
        # measured lines first, then the planned ones dashed over them: where the two fall on the
        # same cells (a plan that is right), both still show, in turns
        for line in sorted(lines, key=lambda one: one.role in DASHED):
            xs, ys = _window(times, line.values, window)
            if not xs:
                continue
            colour = getattr(theme, ROLES[line.role][0]) or "white"
            if len(xs) == 1:  # a single sample: a dot's worth of line
                xs, ys = [xs[0] - 0.01, xs[0]], [ys[0], ys[0]]
            pieces = _dashes(xs, ys, dash) if line.role in DASHED else [(xs, ys)]
            for px, py in pieces:
                plot.plot(px, py, line_style=colour, hires_mode=HiResMode.BRAILLE)
        plot.set_xlimits(-window, 0)
        plot.set_ylimits(0, top if top > 0 else 1)
        plot.set_yticks(ticks)

    def _legend(self) -> None:
        theme = self.app.current_theme
        entries: list[Entry] = []
        for line in self.lines:
            colour, mark = ROLES[line.role]
            forms = []
            for label in (line.label, line.short) if line.short else (line.label,):
                entry = Text(mark, style=getattr(theme, colour) or "")
                entry.append(f" {label}")
                if line.figure:
                    entry.append(f" {line.figure}", style="bold")
                forms.append(entry)
            entries.append((forms[0], forms[1]) if len(forms) == 2 else forms[0])
        self.query_one(Legend).set_entries(entries, Text(self.title, style="bold"))

    def legend_text(self) -> list[str]:
        """The legend's lines as drawn (what tests read)."""
        return self.query_one(Legend).plain_lines()


def _window(times: Sequence[float], values: Sequence[float], window: float) -> tuple[list[float], list[float]]:
    """The points inside the window (and the one just before it, so that the line starts at the
    axis, not where the first point inside happens to be)."""
    start = 0
    for i, t in enumerate(times):
        if t >= -window:
            start = max(i - 1, 0)
            break
    else:
        start = len(times)
    return list(times[start:]), [float(v) for v in values[start:]]


def _dashes(xs: list[float], ys: list[float], dash: float) -> list[tuple[list[float], list[float]]]:
    """The line cut into dashes `dash` seconds long with gaps as long, on a grid fixed to the time
    axis and ending at now (so that the dashes do not crawl as time goes, and the newest part of
    the line is always drawn); each dash follows the line's steps."""
    if dash <= 0 or len(xs) < 2:
        return [(xs, ys)]
    out = []
    end = 0.0
    while end > xs[0]:
        a, b = max(end - dash, xs[0]), min(end, xs[-1])
        if b > a:
            inside = [(x, y) for x, y in zip(xs, ys) if a < x < b]
            px = [a, *(x for x, _ in inside), b]
            py = [_at(xs, ys, a), *(y for _, y in inside), _at(xs, ys, b)]
            out.append((px, py))
        end -= 2 * dash
    return out[::-1]


def _at(xs: list[float], ys: list[float], x: float) -> float:
    """The line's value at `x`: the last sample's at or before it."""
    value = ys[0]
    for xi, yi in zip(xs, ys):
        if xi > x:
            break
        value = yi
    return value


def _pixels(
    times: Sequence[float], values: Sequence[float], top: float, window: float, px_w: int, px_h: int
) -> tuple[tuple[int, int], ...]:
    """The pixels the line's points land on, in braille pixels, a point on the same pixel as the one
    before it left out (it draws nothing new): what decides whether to draw again."""
    if top <= 0 or window <= 0:
        return ()
    out: list[tuple[int, int]] = []
    for t, v in zip(times, values):
        if t < -window:
            continue
        pixel = (int((t + window) / window * px_w), int(min(max(v, 0) / top, 1.0) * px_h))
        if not out or out[-1] != pixel:
            out.append(pixel)
    return tuple(out)
