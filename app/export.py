"""A chat as a Markdown file: what was said, by whom, with the model and the replies' notes."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from app.chat import stop_note
from app.paths import data_dir
from app.store import Conversation


def to_markdown(conv: Conversation, media_folder: str = "") -> str:
    """The chat as Markdown; pictures link to `media_folder/<file>` (beside the .md) when it is given."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(conv.created))
    lines = [f"# {conv.title or 'Chat'}", "", f"*{conv.model_name} · {when} · exported by vramchat*", ""]
    if conv.system_prompt.strip():
        lines += ["> **System prompt:** " + conv.system_prompt.strip().replace("\n", "\n> "), ""]
    for m in conv.messages:
        if m.role not in ("user", "assistant"):
            continue
        who = "You" if m.role == "user" else conv.model_name or "Assistant"
        lines += [f"## {who}", ""]
        for a in m.attachments:
            target = f"{media_folder}/{a.id[:16]}{a.suffix}" if media_folder else ""
            if a.kind == "image" and target:
                lines += [f"![{a.name}]({target})", ""]
            else:
                lines += [f"*{'Picture' if a.kind == 'image' else 'Sound'}: {a.describe()}*", ""]
        lines += [m.content.strip() or ("*(no text)*" if not m.attachments else ""), ""]
        if m.role == "assistant" and m.state == "partial":
            lines += [f"*({stop_note(m.stopped_by) or 'cut short'})*", ""]
    return "\n".join(lines).rstrip() + "\n"


def export_folder() -> Path:
    return data_dir() / "exports"


def export(conv: Conversation, folder: Path | None = None) -> Path:
    """Write the chat to `folder` (vramchat's exports folder by default); returns the file's path."""
    folder = folder or export_folder()
    folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", conv.title or "chat").strip("-").lower()[:48] or "chat"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(conv.updated))
    path = folder / f"{stamp}-{slug}-{conv.id}.md"
    attachments = [a for m in conv.messages for a in m.attachments]
    media_folder = ""
    if attachments:  # the pictures beside the text, in a folder of their own that the Markdown links to
        from app.media import MediaStore

        store = MediaStore()
        media_folder = f"{path.stem}-media"
        (folder / media_folder).mkdir(exist_ok=True)
        for a in attachments:
            if store.has(a):
                shutil.copyfile(store.path_of(a), folder / media_folder / f"{a.id[:16]}{a.suffix}")
    path.write_text(to_markdown(conv, media_folder), encoding="utf-8")
    return path
