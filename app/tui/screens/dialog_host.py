"""A screen that opens the dialogs the widgets on it ask for (app/tui/dialog_asks.py), so that no widget
imports a screen. The dialog opens over whatever shows, as `app.push_screen` does, and its answer goes to
the callback the widget sent with its question."""

from __future__ import annotations

from textual.screen import Screen

from app.tui.dialog_asks import ConfirmAsked


class DialogHost(Screen):
    def on_confirm_asked(self, message: ConfirmAsked) -> None:
        from app.tui.screens.dialogs import ConfirmDialog

        message.stop()
        dialog = ConfirmDialog(
            message.title, message.text, message.confirm, danger=message.danger, focus_confirm=message.focus_confirm
        )
        self.app.push_screen(dialog, message.answered)
