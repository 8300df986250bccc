"""A chat's records: its plan receipts (what it ran with, kept with each reply's branch) and its export
as Markdown and JSON. The chat screen's keys (Ctrl+S, F8) and the palette call these."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.tui.widgets.chat.view import ChatView


def export_chat(screen: ChatView) -> None:
    """Write the chat on screen, with its plan receipts, as Markdown and as JSON, and say where."""
    from app.store.export import export, export_json

    if screen.conversation is None:
        screen.app.notify("There is no chat to export yet.", severity="warning")
        return
    store = screen.services.store
    conv = store.conversation(screen.conversation.id)
    receipts = store.branch_receipts(conv)  # those of the replies on screen
    try:
        path = export(conv, receipts=receipts)
        data = export_json(conv, receipts=receipts)
    except OSError as exc:
        screen.app.notify(f"Could not write the file: {exc}", title="Export failed", severity="error")
        return
    screen.app.notify(f"Saved as Markdown and JSON:\n{data}\n{path}", title="Chat exported", timeout=10)


def save_receipt(screen: ChatView, reply_id: int) -> None:
    """Keep what the chat ran with (the plan, the dry run, the peaks so far) with it, for `reply_id`."""
    from app.store import StoreError
    from app.store.receipt import build, key_for

    session = screen.services.session
    model, telemetry = session.model, session.telemetry
    if model is None or screen.conversation is None:
        return
    store = screen.services.store
    key = key_for(model)
    history = []
    if telemetry is not None:
        telemetry.sample_once()  # the reply's end, which the 2 Hz sampler may not have caught yet
        history = telemetry.history()
    try:
        kept = store.receipt(screen.conversation.id, key)
        store.save_receipt(screen.conversation.id, key, build(model, history, kept.body if kept else None))
        store.set_reply_receipt(reply_id, key)
    except (StoreError, sqlite3.Error) as exc:  # the chat itself is saved; only its receipt is not
        screen.app.notify(f"The plan receipt could not be kept: {exc}", severity="warning")


def show_receipt(screen: ChatView) -> None:
    """The plan receipt of the chat chosen in the list (when the list has the focus), else of the open one."""
    from app.tui.screens.receipt import ReceiptScreen

    conv_id = screen.past_chats.chosen()
    if conv_id is None and screen.conversation is not None:
        conv_id = screen.conversation.id
    if conv_id is None:
        screen.app.notify("There is no chat yet: its receipt is kept once the model replies.", severity="warning")
        return
    store = screen.services.store
    conv = store.conversation(conv_id)
    samplings = [m.sampling for m in conv.messages if m.role == "assistant" and m.sampling is not None]
    receipts = [r.body for r in store.branch_receipts(conv)]
    screen.app.push_screen(ReceiptScreen(conv.title or "(empty chat)", receipts, samplings))
