"""A picture drawn with coloured half blocks ("▀": the upper pixel in front, the lower behind): works in
every terminal with true colour, needs no question asked of the terminal, and reads in an SVG too."""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

CELL_ASPECT = 2.0  # a terminal cell is about twice as tall as it is wide: two pixel rows a cell


class HalfBlocks(Widget):
    """`image` is a PIL image (RGB); it is scaled to the widget's size, its aspect kept."""

    DEFAULT_CSS = """
    HalfBlocks { height: 10; width: auto; }
    """

    def __init__(self, image: Any, *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.image = image
        self._rows: list[Strip] = []
        self._drawn_for = (0, 0)

    def get_content_width(self, container: Any, viewport: Any) -> int:
        height_rule = self.styles.height
        rows = max(int(height_rule.value), 1) if height_rule is not None and height_rule.is_cells else 10
        width, height = self.image.size
        return max(1, min(container.width, round(width / height * rows * CELL_ASPECT)))

    def render_line(self, y: int) -> Strip:
        if self._drawn_for != (self.size.width, self.size.height):
            self._rows = self._draw(self.size.width, self.size.height)
            self._drawn_for = (self.size.width, self.size.height)
        return self._rows[y] if y < len(self._rows) else Strip.blank(self.size.width)

    def _draw(self, columns: int, rows: int) -> list[Strip]:
        if columns <= 0 or rows <= 0:
            return []
        width, height = self.image.size
        scale = min(columns / width, (rows * 2) / height)
        cols, pixel_rows = max(1, int(width * scale)), max(2, int(height * scale) // 2 * 2)
        small = self.image.resize((cols, pixel_rows)).convert("RGB")
        pixels = small.load()
        strips = []
        for row in range(pixel_rows // 2):
            segments = [
                Segment("▀", Style(color=_rgb(pixels[x, 2 * row]), bgcolor=_rgb(pixels[x, 2 * row + 1])))
                for x in range(cols)
            ]
            strips.append(Strip(segments, cols))
        return strips


def _rgb(pixel: tuple[int, int, int]) -> str:
    return f"rgb({pixel[0]},{pixel[1]},{pixel[2]})"
