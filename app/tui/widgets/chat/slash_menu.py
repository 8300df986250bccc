"""The list of slash commands that match what is typed, above the message box.

It never takes the focus: the message box keeps it and passes on the keys that steer the list
(Up, Down, Tab, Enter, Esc) while it is shown.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from app.tui.widgets.chat.slash_commands import BY_NAME, SlashCommand, completions


class SlashMenu(OptionList, can_focus=False):
    DEFAULT_CSS = """
    SlashMenu { display: none; height: auto; max-height: 8; border: round $accent; padding: 0 1; }
    SlashMenu.-shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__(id="slash-menu")
        self._dismissed = ""  # the text Esc closed the list for: it stays closed until the text changes

    @property
    def shown(self) -> bool:
        return self.has_class("-shown")

    def show_for(self, text: str) -> None:
        """The commands `text` may become; hidden when there are none (or Esc closed it for this text)."""
        matches = completions(text) if text != self._dismissed else []
        if not matches:
            self.hide()
            return
        self._dismissed = ""
        self.set_options(Option(self._line(c), id=c.name) for c in matches)
        self.highlighted = 0
        self.add_class("-shown")

    def hide(self) -> None:
        self.remove_class("-shown")

    def dismiss(self, text: str) -> None:
        """Esc: closed until the text changes."""
        self._dismissed = text
        self.hide()

    def move(self, step: int) -> None:
        if step < 0:
            self.action_cursor_up()
        else:
            self.action_cursor_down()

    def chosen(self) -> SlashCommand | None:
        option = self.highlighted_option
        return BY_NAME.get(option.id or "") if option is not None else None

    @staticmethod
    def _line(command: SlashCommand) -> Text:
        line = Text(f"/{command.name}", style="bold")
        line.append(f"  {command.description}", style="dim")
        return line
