"""vramchat's two themes. Styles use theme variables only, so either reads well; the
light one is for light terminals (switch with the command palette: "Theme")."""

from __future__ import annotations

from textual.theme import Theme

DARK = Theme(
    name="vramchat-dark",
    primary="#5FAFD7",
    secondary="#87AFAF",
    accent="#D7AF5F",
    warning="#E0A030",
    error="#E06C6C",
    success="#6CC070",
    foreground="#DADADA",
    background="#15181C",
    surface="#1D2126",
    panel="#262B31",
    dark=True,
)

LIGHT = Theme(
    name="vramchat-light",
    primary="#1F6FA8",
    secondary="#3F7070",
    accent="#9A6A00",
    warning="#B86E00",
    error="#B3261E",
    success="#2E7D32",
    foreground="#1E2328",
    background="#F7F7F5",
    surface="#EEEEEA",
    panel="#E2E3DF",
    dark=False,
)

THEMES = (DARK, LIGHT)
