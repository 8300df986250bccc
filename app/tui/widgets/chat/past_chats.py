"""The past chats beside (or, on a narrow terminal, over) the conversation: a search field and the
list, newest first, the open chat highlighted, each with its model, its length and when it was last
written to. Choosing one posts OptionList.OptionSelected, which the screen answers by opening it;
`Delete` (or `d`) deletes the highlighted chat (Ctrl+Z brings it back), `r` renames it."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option, OptionDoesNotExist

from app.terminal_text import terminal_safe

if TYPE_CHECKING:
    from app.tui.services import Services


def when(moment: float, now: float | None = None) -> str:
    """A chat's date as the list shows it: the time today, "yesterday", the day this year, else the date."""
    now = time.time() if now is None else now
    day, today = time.localtime(moment), time.localtime(now)
    if day[:3] == today[:3]:
        return time.strftime("%H:%M", day)
    if day[:3] == time.localtime(now - 86400)[:3]:
        return "yesterday"
    return time.strftime("%b %d" if day.tm_year == today.tm_year else "%Y-%m-%d", day)


class PastChats(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("delete,d", "screen.delete_chat", "Delete chat", show=False),
        Binding("r", "screen.rename_chat", "Rename chat", show=False),
    ]

    def __init__(self, services: Services, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.services = services
        self.current: int | None = None  # the open conversation's id, highlighted in the list

    def compose(self) -> ComposeResult:
        yield Input(placeholder="Search chats…", id="chat-search")
        yield OptionList(id="chat-list")

    def on_mount(self) -> None:
        self.border_title = "Chats"

    @property
    def options(self) -> OptionList:
        return self.query_one("#chat-list", OptionList)

    @property
    def search(self) -> Input:
        return self.query_one("#chat-search", Input)

    def show(self, current: int | None) -> None:
        """The chats the search finds (the latest 200 without one), `current` highlighted."""
        self.current = current
        store = self.services.store
        if store is None:
            return
        chats = self.options
        chats.clear_options()
        wanted = self.search.value.strip()
        found = store.search(wanted) if wanted else store.conversations(200)
        if wanted and not found:
            chats.add_option(Option(Text(f"No chat mentions “{wanted}”.", style="dim"), disabled=True))
        for c in found:
            title = c.title or "(empty chat)"
            label = Text(terminal_safe(title))
            label.append(f"\n{when(c.updated)} · {terminal_safe(c.model_name)} · {c.n_messages} messages", style="dim")
            chats.add_option(Option(label, id=str(c.id)))
        if current is not None:
            with contextlib.suppress(OptionDoesNotExist):
                chats.highlighted = chats.get_option_index(str(current))

    def highlight(self, conv_id: int) -> None:
        """Highlight `conv_id` (a chat just renamed or brought back: the next key acts on it)."""
        with contextlib.suppress(OptionDoesNotExist):
            self.options.highlighted = self.options.get_option_index(str(conv_id))

    def highlight_row(self, row: int) -> None:
        """Highlight the chat at `row`, or the last one (the chat that took a deleted one's place)."""
        chats = self.options
        if chats.option_count:
            chats.highlighted = min(max(row, 0), chats.option_count - 1)

    @on(Input.Changed, "#chat-search")
    def _search_changed(self, _event: Input.Changed) -> None:
        self.show(self.current)

    def chosen(self) -> int | None:
        """The chat highlighted in the list while the list has the focus (None otherwise)."""
        chats = self.options
        if chats.has_focus and chats.highlighted is not None:
            option = chats.get_option_at_index(chats.highlighted)
            return int(option.id) if option.id is not None else None
        return None
