"""A picture in the conversation: drawn where the terminal can (textual-image: Kitty's graphics protocol,
Sixel, else coloured half-blocks), its name and size beneath it, and only its name and size where it
cannot be drawn.

textual-image asks the terminal what it can draw by writing to it and reading the answer, which it
cannot do once Textual reads the keyboard: `prepare_pictures()` runs before the app starts. A small
copy of the picture is made in a thread (a photo of 12 megapixels is decoded once, not at every
repaint), and drawn when it is ready.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

from app.attachments import Attachment

PICTURES_ENV = "VRAMCHAT_PICTURES"  # "off": names and sizes only
THUMBNAIL_SIDE = 640  # pixels: more than a terminal cell grid of a message shows
_picture_class: Any = None
_prepared = False


def prepare_pictures() -> None:
    """How this terminal draws pictures, found before Textual starts. Kitty's graphics protocol or Sixel
    (textual-image, which asks the terminal) where the environment names a terminal that has them;
    coloured half blocks everywhere else (no question asked: a terminal that does not answer would cost
    its timeout at every start); nothing when turned off."""
    global _picture_class, _prepared
    _prepared = True
    if os.environ.get(PICTURES_ENV, "").lower() in ("off", "0", "no"):
        return
    from app.tui.widgets.half_blocks import HalfBlocks

    _picture_class = HalfBlocks
    tty = bool(sys.__stdout__ and sys.__stdout__.isatty())
    if not tty or not graphics_terminal(os.environ):
        return
    try:
        import textual_image.widget as drawn
    except Exception:  # not installed, or a terminal query that failed: half blocks
        return
    _picture_class = drawn.Image


def graphics_terminal(env: Mapping[str, str]) -> bool:
    """Whether the environment names a terminal that draws pictures itself (Kitty's graphics protocol or
    Sixel): kitty, WezTerm, Ghostty, iTerm2, Konsole, foot, mlterm, Windows Terminal; not inside tmux or
    screen, which pass neither on unless told to."""
    term, program = env.get("TERM", ""), env.get("TERM_PROGRAM", "")
    if env.get("TMUX") or term.startswith(("screen", "tmux")):
        return False
    return (
        bool(env.get("KITTY_WINDOW_ID") or env.get("GHOSTTY_RESOURCES_DIR") or env.get("KONSOLE_VERSION"))
        or bool(env.get("WT_SESSION"))
        or term in ("xterm-kitty", "xterm-ghostty", "wezterm")
        or term.startswith(("foot", "mlterm"))
        or program in ("WezTerm", "ghostty", "iTerm.app")
    )


def picture_class() -> Any:
    """The widget class that draws pictures here, or None. Prepared on first use when no terminal is
    attached (tests): there is nothing to ask then, so nothing is in Textual's way."""
    if not _prepared and not (sys.__stdout__ and sys.__stdout__.isatty()):
        prepare_pictures()
    return _picture_class


_THUMBNAILS: dict[str, Any] = {}


def thumbnail(path: Path) -> Any:
    """A small upright RGB copy of the picture (PIL), kept for the session."""
    key = str(path)
    if key not in _THUMBNAILS:
        from PIL import Image, ImageOps

        with Image.open(path) as im:
            im.draft("RGB", (THUMBNAIL_SIDE, THUMBNAIL_SIDE))
            small = ImageOps.exif_transpose(im).convert("RGB")
            small.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
        _THUMBNAILS[key] = small
    return _THUMBNAILS[key]


class Picture(Vertical):
    """One attachment of a message: the picture (where it can be drawn) over its name and size."""

    DEFAULT_CSS = """
    Picture { height: auto; width: auto; max-width: 100%; margin: 0 0 1 0; }
    Picture .picture-image { height: 10; width: auto; }
    Picture .picture-caption { color: $text-muted; width: auto; }
    """

    def __init__(self, attachment: Attachment, path: Path | None, note: str = "") -> None:
        super().__init__(classes="picture")
        self.attachment = attachment
        self.path = path
        self.note = note

    def compose(self) -> ComposeResult:
        caption = Text(("" if self.attachment.kind == "image" else "♪ ") + self.attachment.describe())
        if self.note:
            caption.append(f" · {self.note}", style="italic")
        yield Static(caption, classes="picture-caption", markup=False)

    def on_mount(self) -> None:
        drawn = picture_class()
        if drawn is None or self.attachment.kind != "image" or self.path is None or not self.path.is_file():
            return
        self._load(drawn)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _load(self, drawn: Any) -> None:
        try:
            small = thumbnail(self.path) if self.path is not None else None
        except Exception:  # a file that cannot be drawn keeps its caption: it was checked when attached
            return
        if small is not None:
            self.app.call_from_thread(self._show, drawn, small)

    def _show(self, drawn: Any, small: Any) -> None:
        if not self.is_attached:
            return
        image: Widget = drawn(small, classes="picture-image")
        self.mount(image, before=0)
