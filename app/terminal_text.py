"""Text from outside made safe for a terminal: the one function every screen, table and log line uses.

A model file's name and template, a file or folder name, a hub's repository id, a server's error and a
model's reply all come from someone else. Written raw, an ESC in any of them is a command to the terminal:
`ESC ] 52 ; c ; ... BEL` writes the clipboard, `ESC [ 31 m` colours the screen, `ESC [ H` moves the cursor.
`terminal_safe` shows every such character visibly instead, as `ls` and `git` do (`\\x1b`, `\\u202e`), so
the user sees that the text holds one and nothing runs. JSON needs nothing of this: `json.dumps` escapes
control characters itself.
"""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls (a C1 CSI, U+009B, is ESC [ to some terminals), Unicode's line and
# paragraph separators, the bidirectional overrides and isolates that reorder what is shown ("Trojan
# source"), and lone surrogates (undecodable bytes, which a terminal's encoder refuses)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_MULTILINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str, *, multiline: bool = False) -> str:
    """`text` with every character that could command a terminal shown as an escape (`\\x1b`).

    `multiline`: newlines and tabs stay (a reply, a template, a message); otherwise they are shown too, so
    that a name stays on its one line."""
    pattern = _UNSAFE_MULTILINE if multiline else _UNSAFE
    return pattern.sub(_visible, text)


def is_terminal_safe(text: str, *, multiline: bool = False) -> bool:
    """Whether `text` is written as it is (nothing in it would be shown as an escape)."""
    return (_UNSAFE_MULTILINE if multiline else _UNSAFE).search(text) is None
