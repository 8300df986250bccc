"""The command line's exit statuses, and its one-line error on stderr."""

from __future__ import annotations

import sys

EXIT_OK, EXIT_BAD_FILE, EXIT_USAGE, EXIT_NO_FIT, EXIT_LOAD_FAILED = 0, 1, 2, 3, 4
EXIT_CANCELLED = 130  # Ctrl+C, as a shell reports a command ended by SIGINT
EXIT_STDOUT_CLOSED = 141  # as a shell reports a command ended by SIGPIPE


def fail(message: str, code: int) -> int:
    print(f"vramchat: error: {message}", file=sys.stderr)
    return code
