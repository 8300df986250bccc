"""Sections of docs/accuracy.md that another script writes (CUDA from a lent GPU's record, Vulkan from the
Vulkan tier): each between two markers, kept as it is by `bench/accuracy.py`, replaced by its own script."""

from __future__ import annotations

from pathlib import Path


def kept_section(path: Path, begin: str, end: str) -> str:
    """The text between `begin` and `end` (markers included), or '' where the file has none."""
    text = path.read_text() if path.exists() else ""
    if begin not in text or end not in text:
        return ""
    return text[text.index(begin) : text.index(end) + len(end)]


def replace_section(path: Path, begin: str, end: str, section: str, before: str = "") -> None:
    """Put `section` (markers included) where the old one was, else before the marker `before`, else at the end."""
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        text = text[: text.index(begin)] + section + text[text.index(end) + len(end) :]
    elif before and before in text:
        at = text.index(before)
        text = text[:at] + section + "\n\n" + text[at:]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)
