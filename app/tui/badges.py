"""How a fit badge is coloured, wherever it is drawn (the picker's list, the hub view's repos and quants)."""

from __future__ import annotations

from typing import Any

# the kind `app.catalog.fit_badge` gives -> the theme's colour for it
BADGE_COLOR = {
    "full": "success",
    "partial": "accent",
    "cpu": "secondary",
    "none": "error",
    "error": "error",
    "pending": "foreground",
}


def badge_style(kind: str, theme: Any) -> str:
    """The Rich style of a badge of this kind in `theme` (a Textual theme)."""
    color = getattr(theme, BADGE_COLOR.get(kind, "foreground"), None) or ""
    return f"bold {color}".strip()
