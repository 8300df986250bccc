"""A hub download's progress in the title line of every other screen: the download goes on when the user
leaves the hub view (F7), and the model list or the chat says how far it is, until it ends (its end, or
its failure, is a notification of its own).

The download panel posts `DownloadNoted` with a short note (or '' when it ends); the app keeps it and
adds it to the title it formats for each screen's header (`with_note`), the hub's own left out (its
panel shows the whole progress).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.content import Content
from textual.message import Message

if TYPE_CHECKING:
    from app.sources.download import Progress

ROOM_FOR_THE_REST = 24  # columns the header's icon and margins take beside the title


@dataclass
class DownloadNoted(Message):
    """To the app: where the hub's download stands, in a few words ('' when none runs)."""

    note: str


def progress_note(progress: Progress) -> str:
    """The download, as the title line shows it: its file and how much of it arrived."""
    percent = int(progress.fraction * 100)
    return f"↓ {progress.file} {percent}%"


def with_note(title: Content, note: str, width: int) -> Content:
    """`title` with the download's note after it; its file name left out where the line is too narrow."""
    if not note:
        return title
    if len(title.plain) + len(note) + 3 > width - ROOM_FOR_THE_REST:
        note = f"↓ downloading {note.rsplit(' ', 1)[-1]}"
    return Content.assemble(title, (" · ", "dim"), (note, "bold"))
