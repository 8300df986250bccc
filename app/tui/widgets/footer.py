"""The key bar, compact on narrow terminals so that the keys a screen needs all show; where even then they
do not fit (the message list's keys beside the chat's at 80 columns), the screen's own keys give way, the
rightmost first, then the app's: the keys of what has the focus stay, and no key is cut in the middle.
Every key stays in the help (F1) and the palette (Ctrl+P)."""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

COMPACT_BELOW = 120  # columns: below this the keys go without the space between them


class AdaptiveFooter(Footer):
    _fitted_width = 0
    _keys_shown: tuple[tuple[object, ...], ...] | None = None  # the bindings the keys were last composed for

    def on_resize(self, event: events.Resize) -> None:
        self.compact = event.size.width < COMPACT_BELOW
        if event.size.width != self._fitted_width:
            self.call_after_refresh(self.recompose)

    def bindings_changed(self, screen: Screen) -> None:
        """Textual composes the keys again whenever the screen's bindings are refreshed (a focus moved, widgets
        mounted: three times, 15-25 ms each, as the picker starts); only a change of the keys shown does here."""
        if self._keys_shown is not None and screen is self.screen and self._bindings_now() == self._keys_shown:
            return
        super().bindings_changed(screen)

    def _bindings_now(self) -> tuple[tuple[object, ...], ...]:
        """What the bar shows of the screen's bindings: each shown key with its words, action and state."""
        return tuple(
            (binding.key, binding.description, binding.action, binding.group, enabled, tooltip)
            for _, binding, enabled, tooltip in self.screen.active_bindings.values()
            if binding.show
        )

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        if keys:
            self._keys_shown = self._bindings_now()
        # before its first layout the bar is as wide as the terminal: fitted now, not recomposed a frame later
        self._fitted_width = width = self.size.width or self.app.size.width
        yield from self._fitting(keys, width) if width else keys

    def _fitting(self, keys: list[Widget], width: int) -> list[Widget]:
        """`keys` less those that do not fit in `width` columns, the least needed first."""
        kept = list(keys)
        for key in self._giving_way(kept):
            if sum(self._width(k) for k in kept) <= width:
                break
            kept.remove(key)
        return kept

    def _giving_way(self, keys: list[Widget]) -> list[FooterKey]:
        """The keys that may be left out, in the order they go: the screen's, then the app's, each from the right."""
        bindings = self.screen.active_bindings
        owner = {k: bindings[k.key].node for k in keys if isinstance(k, FooterKey) and k.key in bindings}
        palette = [k for k in keys if k.has_class("-command-palette")]
        screens = [k for k, node in owner.items() if node is self.screen and k not in palette]
        apps = [k for k, node in owner.items() if node is self.app and k not in palette]
        return [*reversed(screens), *reversed(apps)]

    def _width(self, key: Widget) -> int:
        """The columns a key takes in the bar, as the footer's styles lay it out."""
        if not isinstance(key, FooterKey):
            return 0
        described = bool(key.description)
        words = cell_len(key.key_display) + (1 + cell_len(key.description) if described else 0)
        # compact: a gap after each key; else padding around the key and after the words
        width = words + 1 if self.compact else words + 1 + int(described)
        if key.has_class("-command-palette"):
            width += 1 + (0 if self.compact else 1)  # its left border, its right padding
        return width
