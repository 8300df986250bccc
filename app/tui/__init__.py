"""The Textual app. Imported only when the app runs: `--plan` and `--list` never load Textual."""

from __future__ import annotations


def run(options: object) -> int:
    """Run the app; returns the exit status."""
    from functools import partial

    from app.tui import early_probe
    from app.tui.services import AppOptions, probe_for  # loaded with the command line's options already

    assert isinstance(options, AppOptions)
    early_probe.begin(partial(probe_for, options))  # beside Textual's import: the first list waits for it
    from app.tui.app import VramchatApp
    from app.tui.widgets.picture import prepare_pictures

    prepare_pictures()  # how the terminal draws pictures: found before Textual reads the keyboard
    app = VramchatApp(options)
    from app.collector import resume

    resume(freeze=True)  # the modules, classes and styles loaded so far live as long as the app: never walked again
    app.run()
    return app.return_code or 0
