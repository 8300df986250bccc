"""The Textual app. Imported only when the app runs: `--plan` and `--list` never load Textual."""

from __future__ import annotations


def run(options: object) -> int:
    """Run the app; returns the exit status."""
    from app.tui.app import AppOptions, VramchatApp
    from app.tui.widgets.picture import prepare_pictures

    assert isinstance(options, AppOptions)
    prepare_pictures()  # how the terminal draws pictures: found before Textual reads the keyboard
    app = VramchatApp(options)
    app.run()
    return app.return_code or 0
