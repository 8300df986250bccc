"""A screen that opens the dialogs the widgets on it ask for (app/tui/dialog_asks.py), so that no widget
imports a screen. The dialog opens over whatever shows, as `app.push_screen` does, and its answer goes to
the callback the widget sent with its question."""

from __future__ import annotations

from textual.screen import Screen

from app.tui.dialog_asks import ChatSettingsAsked, ConfirmAsked, ReceiptAsked, RenameAsked


class DialogHost(Screen):
    def on_confirm_asked(self, message: ConfirmAsked) -> None:
        from app.tui.screens.dialogs import ConfirmDialog

        message.stop()
        dialog = ConfirmDialog(
            message.title, message.text, message.confirm, danger=message.danger, focus_confirm=message.focus_confirm
        )
        self.app.push_screen(dialog, message.answered)

    def on_rename_asked(self, message: RenameAsked) -> None:
        from app.tui.screens.rename import RenameDialog

        message.stop()
        self.app.push_screen(RenameDialog(message.current), message.answered)

    def on_chat_settings_asked(self, message: ChatSettingsAsked) -> None:
        from app.tui.screens.dialogs import ChatSettingsDialog

        message.stop()
        self.app.push_screen(ChatSettingsDialog(message.current, message.scope, message.model_own), message.answered)

    def on_receipt_asked(self, message: ReceiptAsked) -> None:
        from app.tui.screens.receipt import ReceiptScreen

        message.stop()
        self.app.push_screen(ReceiptScreen(message.title, message.receipts, message.samplings))
