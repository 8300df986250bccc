"""Text from outside made safe for a terminal: the one function every screen, table and log line uses.

A model file's name and template, a file or folder name, a hub's repository id, a server's error and a
model's reply all come from someone else. Written raw, an ESC in any of them is a command to the terminal:
`ESC ] 52 ; c ; ... BEL` writes the clipboard, `ESC [ 31 m` colours the screen, `ESC [ H` moves the cursor.
`terminal_safe` shows every such character visibly instead, as `ls` and `git` do (`\\x1b`, `\\u202e`), so
the user sees that the text holds one and nothing runs. JSON needs nothing of this: `json.dumps` escapes
control characters itself.
"""

from __future__ import annotations

import functools
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: a replayed plan's start is short
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, TextIO


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# C0 controls, DEL and C1 controls (a C1 CSI, U+009B, is ESC [ to some terminals), Unicode's line and
# paragraph separators, the bidirectional overrides and isolates that reorder what is shown ("Trojan
# source"), and lone surrogates (undecodable bytes, which a terminal's encoder refuses)
_UNSAFE = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_KEPT_IN_MULTILINE = (0x09, 0x0A)
# ASCII text (a plan's JSON, most names) needs only C0 and DEL: the full tables, 2,100 entries with the surrogates,
# are made at the first text that is not ASCII (str.isascii is a flag CPython keeps, not a scan)
_ASCII_ONE_LINE = {code: _escape(code) for code in (*range(0x00, 0x20), 0x7F)}
_ASCII_MULTILINE = {code: text for code, text in _ASCII_ONE_LINE.items() if code not in _KEPT_IN_MULTILINE}


@functools.cache
def _full_tables() -> tuple[dict[int, str], dict[int, str]]:
    """(one line, multiline): every unsafe character's escape, made once."""
    one_line = {code: _escape(code) for code in _UNSAFE}
    one_line.update({code: f"\\u{code:04x}" for code in range(0xD800, 0xE000)})
    multiline = {code: text for code, text in one_line.items() if code not in _KEPT_IN_MULTILINE}
    return one_line, multiline


def terminal_safe(text: str, *, multiline: bool = False) -> str:
    """`text` with every character that could command a terminal shown as an escape (`\\x1b`).

    `multiline`: newlines and tabs stay (a reply, a template, a message); otherwise they are shown too, so
    that a name stays on its one line."""
    if text.isascii():
        return text.translate(_ASCII_MULTILINE if multiline else _ASCII_ONE_LINE)
    return text.translate(_full_tables()[1 if multiline else 0])


def is_terminal_safe(text: str, *, multiline: bool = False) -> bool:
    """Whether `text` is written as it is (nothing in it would be shown as an escape)."""
    return terminal_safe(text, multiline=multiline) == text


class SafeStream:
    """A text stream (stdout, stderr) that writes everything through `terminal_safe`: the command line's
    tables, answers, errors and logs hold names and text from outside. vramchat's own control sequences
    (a progress line's `\\r\\x1b[K`, the guardian's terminal reset) go through `write_control`."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal_safe(text, multiline=True))
        return len(text)

    def write_control(self, sequence: str) -> None:
        self._stream.write(sequence)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding ... as the stream's own
        return getattr(self._stream, name)


def write_control(stream: TextIO | SafeStream, sequence: str) -> None:
    """Write vramchat's own control `sequence` (never text from outside) to `stream`, guarded or not."""
    if isinstance(stream, SafeStream):
        stream.write_control(sequence)
    else:
        stream.write(sequence)


def guard_streams() -> None:
    """stdout and stderr of this process written through `terminal_safe` from now on (once)."""
    if not isinstance(sys.stdout, SafeStream) and sys.stdout is not None:
        sys.stdout = SafeStream(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, SafeStream) and sys.stderr is not None:
        sys.stderr = SafeStream(sys.stderr)  # type: ignore[assignment]
