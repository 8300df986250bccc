"""The Textual app. Imported only when the app runs: `--plan` and `--list` never load Textual."""

from __future__ import annotations


def run(options: object) -> int:
    """Run the app; returns the exit status."""
    from app.tui.app import AppOptions, VramchatApp

    assert isinstance(options, AppOptions)
    app = VramchatApp(options)
    app.run()
    return app.return_code or 0
