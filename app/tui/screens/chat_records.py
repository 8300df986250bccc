"""A chat's records: its plan receipts (what it ran with, kept with each reply's branch) and its export
as Markdown and JSON. The chat's controller (app/tui/screens/chat_controller.py) calls these for the
chat it names: Ctrl+S, F8 and the palette."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

    from app.store import Store
    from app.tui.services import Services


def export_chat(app: App[Any], store: Store, conv_id: int) -> None:
    """Write the chat, with its plan receipts, as Markdown and as JSON, and say where."""
    from app.store.export import export, export_json

    conv = store.conversation(conv_id)
    receipts = store.branch_receipts(conv)  # those of the replies on screen
    try:
        path = export(conv, receipts=receipts)
        data = export_json(conv, receipts=receipts)
    except OSError as exc:
        app.notify(f"Could not write the file: {exc}", title="Export failed", severity="error")
        return
    app.notify(f"Saved as Markdown and JSON:\n{data}\n{path}", title="Chat exported", timeout=10)


def save_receipt(app: App[Any], services: Services, conv_id: int, reply_id: int) -> None:
    """Keep what the chat ran with (the plan, the dry run, the peaks so far) with it, for `reply_id`."""
    from app.store import StoreError
    from app.store.receipt import build, key_for

    session = services.session
    model, telemetry = session.model, session.telemetry
    if model is None:
        return
    store = services.store
    key = key_for(model)
    history = []
    if telemetry is not None:
        telemetry.sample_once()  # the reply's end, which the 2 Hz sampler may not have caught yet
        history = telemetry.history()
    try:
        kept = store.receipt(conv_id, key)
        speed = session.engine.last_stats.tokens_per_second  # the reply just ended
        store.save_receipt(conv_id, key, build(model, history, kept.body if kept else None, speed))
        store.set_reply_receipt(reply_id, key)
    except (StoreError, sqlite3.Error) as exc:  # the chat itself is saved; only its receipt is not
        app.notify(f"The plan receipt could not be kept: {exc}", severity="warning")


def show_receipt(app: App[Any], store: Store, conv_id: int) -> None:
    """The chat's plan receipts, with what each reply on screen was sampled with."""
    from app.tui.screens.receipt import ReceiptScreen

    conv = store.conversation(conv_id)
    samplings = [m.sampling for m in conv.messages if m.role == "assistant" and m.sampling is not None]
    receipts = [r.body for r in store.branch_receipts(conv)]
    app.push_screen(ReceiptScreen(conv.title or "(empty chat)", receipts, samplings))
