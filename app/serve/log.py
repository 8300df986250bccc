"""One line per request, as `vramchat serve` prints it: when, what, how it ended, how much, how fast.
Anything a client chose (its address, a model name) is made safe for the terminal first."""

from __future__ import annotations

import time

from app.serve.monitor import Finished
from app.terminal_text import terminal_safe


def request_line(finished: Finished, client: str = "", compact: bool = False) -> str:
    """`compact`: the dashboard's narrower line (the endpoint's last word, no time to first token)."""
    when = time.strftime("%H:%M:%S", time.localtime(finished.ended))
    short = "chat" if "chat" in finished.endpoint else finished.endpoint.rsplit("/", 1)[-1]
    parts = [when, f"{finished.status}", short if compact else f"{finished.endpoint:<22}"]
    if finished.prompt_tokens or finished.tokens:
        counts = (
            f"{finished.prompt_tokens} → {finished.tokens}"
            if compact
            else f"{finished.prompt_tokens:>5} → {finished.tokens:<4}"
        )
        parts.append(f"{counts} tokens")
        if finished.tokens_per_second:
            parts.append(
                f"{finished.tokens_per_second:.1f} tok/s" if compact else f"{finished.tokens_per_second:6.1f} tok/s"
            )
        if finished.first_token_seconds and not compact:
            parts.append(f"first {finished.first_token_seconds * 1000:.0f} ms")
    parts.append(f"{finished.seconds:.2f} s")
    if finished.stopped_by:
        parts.append(finished.stopped_by)
    if client:
        parts.append(terminal_safe(client))
    return ("  " if not compact else " ").join(parts)
