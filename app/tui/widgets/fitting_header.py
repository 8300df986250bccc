"""The header, its sub-title shortened to what it can show whole.

Textual's header shows "title — sub-title" between its icon (8 columns) and its clock space (10), and
cuts a longer one with an ellipsis wherever it falls: "Qwen3 Coder 30B A3B Instruct · 4,096 of 8,192
t…" at 80 columns. This one drops the sub-title's
" · "-separated parts from the end until the rest fits (the dropped figures are on the status line),
and shows no sub-title rather than part of a word.
"""

from __future__ import annotations

from textual import events
from textual.content import Content
from textual.widgets import Header, Static

BESIDE_TITLE = 8 + 10  # the header's icon and clock space
SEPARATOR = " · "


def fitting_sub_title(title: str, sub_title: str, width: int) -> str:
    """The longest run of the sub-title's leading parts that shows whole beside `title` at `width` columns."""
    room = width - BESIDE_TITLE - len(title) - len(" — ")
    parts = sub_title.split(SEPARATOR)
    while parts and len(SEPARATOR.join(parts)) > room:
        parts.pop()
    return SEPARATOR.join(parts)


class FittingHeader(Header):
    def format_title(self) -> Content:
        title = self.screen_title
        return self.app.format_title(title, fitting_sub_title(title, self.screen_sub_title, self.size.width))

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("HeaderTitle", Static).update(self.format_title())
