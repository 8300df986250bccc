"""What a widget (or a screen's helper module) asks the screen it is on to open: the dialogs are screens
(app/tui/screens/), and a widget never imports one. The widget posts the question as a message; the screen,
a DialogHost (app/tui/screens/dialog_host.py), opens the dialog and hands the answer to `answered`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual.message import Message


@dataclass
class ConfirmAsked(Message):
    """A yes/no question: `answered` gets True for `confirm`, False (or None) for Cancel."""

    title: str
    text: str
    answered: Callable[[bool | None], None]
    confirm: str = "OK"
    danger: bool = False
    focus_confirm: bool = False
