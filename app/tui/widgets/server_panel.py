"""The server in the dashboard, while the app serves the model (/serve): where it listens, the requests
on the engine and in the queue (each one's tokens, tokens per second and the KV cells its sequence holds),
and the last ones served, as `vramchat serve` logs them. Hidden while the app does not serve."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.widgets import Static

from app.serve.log import request_line
from app.telemetry import kv_bytes_in_use
from app.terminal_text import terminal_safe
from planner.hardware import format_size

if TYPE_CHECKING:
    from app.serve.monitor import Monitor
    from app.session import ModelSession
    from app.tui.serving import AppServer

REFRESH_SECONDS = 1.0
RECENT_SHOWN = 6


def server_lines(serving: AppServer, monitor: Monitor, session: ModelSession | None) -> list[str]:
    """The panel's text, line by line."""
    model = session.model if session is not None else None
    layout = model.plan.kv if model is not None else None
    running = monitor.running()
    totals = monitor.totals()
    served = sum(totals.requests.values())
    failed = sum(n for (_endpoint, status), n in totals.requests.items() if status >= 400)
    on_engine = [r for r in running if not r.waiting]
    waiting = len(running) - len(on_engine)
    lines = [
        f"Serving {terminal_safe(serving.model_id)} at {serving.url}",
        f"OPENAI_BASE_URL={serving.url} points a tool at it",
        f"{len(on_engine)} running · {waiting} waiting · {monitor.tokens_per_second():.1f} tok/s · "
        f"{served} served ({failed} refused or failed)",
    ]
    now = time.monotonic()
    for r in on_engine:
        kv = kv_bytes_in_use(layout, r.cells)
        lines.append(
            f"  #{r.id} {r.endpoint} · {r.prompt_tokens:,} → {r.tokens:,} tokens · "
            f"{r.tokens_per_second(now):.1f} tok/s · KV {r.cells:,} cells ({format_size(kv)})"
        )
    recent = monitor.recent()[-RECENT_SHOWN:]
    if recent:
        lines.append("Last served:")
        lines += [f"  {request_line(f, compact=True)}" for f in reversed(recent)]
    return lines


class ServerPanel(Static):
    DEFAULT_CSS = """
    ServerPanel { height: auto; padding: 0 1; border: round $foreground 25%; border-title-color: $primary; }
    """

    def __init__(
        self,
        serving: Callable[[], AppServer | None],
        session: Callable[[], ModelSession | None],
        *,
        id: str | None = None,
    ) -> None:
        super().__init__("", id=id, markup=False)
        self._serving = serving
        self._session = session
        self._text = ""

    def on_mount(self) -> None:
        self.border_title = "Server"
        self.refresh_panel()
        self.set_interval(REFRESH_SECONDS, self.refresh_panel)

    def refresh_panel(self) -> None:
        serving = self._serving()
        monitor = serving.monitor if serving is not None else None
        if serving is None or monitor is None:
            self.display = False
            return
        self.display = True
        text = "\n".join(server_lines(serving, monitor, self._session()))
        if text != self._text:
            self._text = text
            self.update(text)
