"""Where a screenshot goes: the user's Downloads folder when it exists, else vramchat's data folder."""

from __future__ import annotations

from pathlib import Path


def screenshot_folder() -> Path:
    """Downloads (platformdirs' idea of it) if it is there; otherwise `<data>/screenshots`, made."""
    from platformdirs import user_downloads_dir

    from app.paths import data_dir

    downloads = Path(user_downloads_dir())
    if downloads.is_dir():
        return downloads
    folder = data_dir() / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
