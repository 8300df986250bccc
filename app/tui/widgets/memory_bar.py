"""A device's memory map: one stacked bar to scale, and a legend that names every part with its size.

The parts come from app.telemetry.memory_map (the plan at the context held now and at its maximum, and
the live reading). The bar is as wide as the widget; the legend packs its entries whole into
as many lines as the width needs; the tooltip explains each part in a sentence.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from app.telemetry.memory_map import DeviceMap, cell_widths
from app.tui.widgets.legend import pack
from planner.hardware import HOST, format_size

# part -> (theme colour, the character its cells are drawn with): ours solid, others' shaded,
# the room kept free light, so that the bar also reads without colour
LOOK: dict[str, tuple[str, str]] = {
    "weights": ("primary", "█"),
    "mapped": ("primary", "▒"),
    "kv_in_use": ("success", "█"),
    "kv_empty": ("success", "▒"),
    "swa": ("secondary", "█"),
    "recurrent": ("secondary", "▒"),
    "output": ("warning", "▒"),
    "compute": ("warning", "█"),
    "projector": ("error", "▒"),
    "overhead": ("error", "█"),
    "others": ("foreground", "▓"),
    "reserved": ("success", "░"),
    "margin": ("foreground", "░"),
    "free": ("foreground", "·"),
}


def device_title(name: str) -> str:
    if name == HOST:
        return "Host RAM"
    if name.startswith("RPC"):
        return f"{name} (remote)"
    return name


class MemoryBar(Widget):
    """The map of one device; `show(device_map)` redraws it when a figure changed."""

    DEFAULT_CSS = """
    MemoryBar { height: auto; margin-bottom: 1; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.map: DeviceMap | None = None
        self._shown: object = None

    def show(self, device_map: DeviceMap) -> None:
        key = (device_map.total, device_map.short, tuple((s.key, _rounded(s.bytes)) for s in device_map.segments))
        if key == self._shown:
            return
        self._shown = key
        lines = len(self.lines(self.size.width)) if self.map is not None and self.size.width else -1
        self.map = device_map
        self.tooltip = "\n".join(f"{s.label}: {format_size(s.bytes)}, {s.explanation}" for s in device_map.segments)
        self.refresh(layout=len(self.lines(self.size.width)) != lines)  # a layout only for another height

    def _colour(self, key: str) -> str:
        theme = self.app.current_theme
        return getattr(theme, LOOK[key][0]) or ""

    def entries(self) -> list[Text]:
        if self.map is None:
            return []
        out = []
        for s in self.map.segments:
            entry = Text(LOOK[s.key][1] * 2, style=self._colour(s.key))
            entry.append(f" {s.label} ")
            entry.append(_size(s.bytes), style="bold")
            out.append(entry)
        return out

    def lines(self, width: int) -> list[Text]:
        if self.map is None:
            return [Text("")]
        m = self.map
        title = Text(device_title(m.name), style="bold")
        title.append(f" · {_size(m.total)}")
        lines = pack([], width, title)
        bar = Text()
        sizes = [s.bytes for s in m.segments]
        for s, cells in zip(m.segments, cell_widths(sizes, max(m.total, sum(sizes)), width)):
            bar.append(LOOK[s.key][1] * cells, style=self._colour(s.key))
        lines.append(bar)
        lines += pack(self.entries(), width)
        if m.short:
            lines += pack(
                [Text(f"Other programs took {_size(m.short)} of the room the plan keeps free.", style="bold")],
                width,
            )
        return lines

    def plain_lines(self) -> list[str]:
        return [line.plain for line in self.lines(self.size.width)]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Text:
        return Text("\n").join(self.lines(self.size.width))


def _rounded(n: int) -> int:
    """Sizes to the precision a glance needs, so that a figure that jitters by a few KiB does not
    repaint the map twice a second."""
    return round(n / (1 << 20)) if n >= 100 << 20 else n >> 10


def _size(n: int) -> str:
    if 100 << 20 <= n < 1 << 30:
        return f"{n / (1 << 20):.0f} MiB"
    return format_size(n)
