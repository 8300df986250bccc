"""The key bar, compact on narrow terminals so that the keys a screen needs all show."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

COMPACT_BELOW = 120  # columns: below this the keys go without the space between them


class AdaptiveFooter(Footer):
    def on_resize(self, event: events.Resize) -> None:
        self.compact = event.size.width < COMPACT_BELOW
