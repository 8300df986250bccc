"""A one-row status line that says as much as its width holds: parts in order, the least important
dropped first (never a part cut in the middle), fitted again whenever its width changes."""

from __future__ import annotations

from textual import events
from textual.widgets import Static

Part = tuple[int, str]  # (rank: 0 most important, the text); an empty text is left out


def fit_parts(parts: list[Part], width: int, sep: str = " · ") -> str:
    """The parts that fit in `width`, in their order, dropping the least important (highest rank)
    first; the most important one is kept whole, or cut with an ellipsis when even it is too long."""
    kept = [(rank, text) for rank, text in parts if text]
    while len(kept) > 1 and len(sep.join(t for _, t in kept)) > width:
        kept.remove(max(kept, key=lambda p: p[0]))
    line = sep.join(t for _, t in kept)
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


class StatusLine(Static):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._parts: list[Part] = []

    def show(self, parts: list[Part]) -> None:
        self._parts = parts
        self._fit(self.content_region.width or self.app.size.width)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(self.content_region.width or event.size.width)

    def _fit(self, width: int) -> None:
        self.update(fit_parts(self._parts, width))
