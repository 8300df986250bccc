"""Deleting a downloaded model from the model list (the Delete key): what it frees is asked first, only
files in vramchat's own models folder go (app/sources/downloaded.py), and the row leaves the list. The
question is the list's screen's to ask (app/tui/dialog_asks.py). Ollama's
models are never deleted here: their blobs are Ollama's, often shared by several names (`ollama rm NAME`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from app.tui.dialog_asks import ConfirmAsked
from planner.units import format_size

if TYPE_CHECKING:
    from app.catalog import CatalogEntry
    from app.tui.services import Services


class ModelList(Protocol):
    """What deleting needs of the model list (the picker): its selection, and to forget a deleted row."""

    selected: str | None
    services: Services

    @property
    def entries(self) -> dict[str, CatalogEntry]: ...

    @property
    def app(self) -> Any: ...

    def post_message(self, message: ConfirmAsked) -> bool: ...

    def model_name(self, path: str) -> str: ...

    def forget(self, path: str) -> None: ...


def ask_to_delete(picker: ModelList) -> None:
    """Confirm, then delete the selected model (its shards, and its projector when no other model uses it)."""
    from app.sources.downloaded import NotOurs, delete_model, plan_deletion

    path = picker.selected
    entry = picker.entries.get(path or "")
    if path is None or entry is None:
        picker.app.notify("Select the model to delete first.", severity="warning")
        return
    name = picker.model_name(path)
    file = entry.file
    if file.ollama_name:
        picker.app.notify(
            f"{name} is Ollama's: vramchat reads its files and never deletes them (other names may share "
            f"them). To remove it: ollama rm {file.ollama_name}",
            title="Not deleted",
            severity="warning",
            timeout=10,
        )
        return
    session = picker.services.started_session()
    loaded = session.model if session is not None else None
    if loaded is not None and os.path.realpath(loaded.path) == os.path.realpath(file.path):
        picker.app.notify(f"{name} is loaded: load another model first.", title="Not deleted", severity="warning")
        return
    try:
        deletion = plan_deletion(file.shards or [path], file.projectors, file.is_demo)
    except NotOurs as exc:
        picker.app.notify(str(exc), title=exc.title, severity="warning", timeout=10)
        return
    listed = "\n".join(f"  {p.name}" for p in deletion.files)
    text = (
        f"{name}: delete {len(deletion.files)} file{'s' if len(deletion.files) != 1 else ''} from "
        f"{os.path.dirname(path)}, freeing {format_size(deletion.freed)}:\n{listed}\n\n"
        "The hub (F7) can download it again."
    )

    def done(yes: bool | None) -> None:
        if not yes:
            return
        try:
            freed = delete_model(deletion)
        except OSError as exc:
            picker.app.notify(f"{name} could not be deleted: {exc.strerror or exc}", severity="error")
            return
        picker.forget(path)
        picker.app.notify(f"{name} is deleted: {format_size(freed)} freed.", title="Deleted", timeout=6)

    picker.post_message(ConfirmAsked("Delete this model?", text, done, confirm="Delete", danger=True))
