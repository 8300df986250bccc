"""A chat as files to keep or share: Markdown to read, JSON for a bug report or a script.

Both carry what was said, by whom, with the model and the replies' notes, and the chat's plan
receipts (app.store.receipt): the plan it ran with, llama.cpp's dry run and the measured peaks.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

from app import __version__
from app.conversation.outcome import empty_reply_marker, stop_note
from app.conversation.reasoning import split_reply
from app.conversation.sampling import sampling_words
from app.paths import data_dir
from app.store import Conversation, StoredMessage, StoredReceipt
from app.store.receipt import to_markdown as receipt_markdown

JSON_SCHEMA = 1


def to_markdown(conv: Conversation, receipts: list[StoredReceipt] | None = None, media_folder: str = "") -> str:
    """The chat as Markdown, its receipts at the end; pictures link to `media_folder/<file>` (beside
    the .md) when it is given."""
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
        if m.role == "assistant":
            lines += _reply_lines(m)
        else:
            lines += [m.content.strip() or ("*(no text)*" if not m.attachments else ""), ""]
    for i, r in enumerate(receipts or []):
        title = "Plan receipt" if len(receipts or []) == 1 else f"Plan receipt {i + 1}"
        lines += [f"## {title}", "", receipt_markdown(r.body), ""]
    return "\n".join(lines).rstrip() + "\n"


def _reply_lines(m: StoredMessage) -> list[str]:
    """A reply in Markdown: its reasoning apart, in a fold, then its answer, how it ended and what it was sampled
    with."""
    split = split_reply(m.content)
    lines: list[str] = []
    if split.has_reasoning:
        thought = split.reasoning.strip() or "(nothing)"
        lines += ["<details><summary>Thought</summary>", "", thought, "", "</details>", ""]
    answer = split.answer.strip()
    lines += [answer or f"*({empty_reply_marker(m.stopped_by)})*", ""]
    if m.state == "partial":
        lines += [f"*({stop_note(m.stopped_by) or 'cut short'})*", ""]
    if m.sampling is not None:
        lines += [f"*Sampled with: {sampling_words(m.sampling)}*", ""]
    return lines


def to_json(conv: Conversation, receipts: list[StoredReceipt] | None = None) -> dict[str, Any]:
    """The chat as one JSON object: its messages and its plan receipts (sizes in bytes)."""
    return {
        "schema": JSON_SCHEMA,
        "exported_by": f"vramchat {__version__}",
        "title": conv.title,
        "model": {"name": conv.model_name, "path": conv.model_path},
        "created": conv.created,
        "updated": conv.updated,
        "system_prompt": conv.system_prompt,
        "messages": [
            {
                "role": m.role,
                "content": m.content,
                **_reasoning_apart(m),
                "state": m.state,
                "stopped_by": m.stopped_by,
                "tokens": m.tokens,
                "tokens_per_second": m.tokens_per_second,
                **({"sampling": m.sampling} if m.sampling is not None else {}),
                "attachments": [
                    {
                        "kind": a.kind,
                        "name": a.name,
                        "sha256": a.id,
                        "bytes": a.size,
                        "width": a.width,
                        "height": a.height,
                    }
                    for a in m.attachments
                ],
            }
            for m in conv.messages
        ],
        "receipts": [r.body for r in receipts or []],
    }


def _reasoning_apart(m: StoredMessage) -> dict[str, str]:
    """A reply's answer and reasoning, each on its own (`content` keeps the reply as the model wrote it)."""
    if m.role != "assistant":
        return {}
    split = split_reply(m.content)
    return {"answer": split.answer.strip(), "reasoning": split.reasoning.strip()} if split.has_reasoning else {}


def export_folder() -> Path:
    return data_dir() / "exports"


def _stem(conv: Conversation) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", conv.title or "chat").strip("-").lower()[:48] or "chat"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(conv.updated))
    return f"{stamp}-{slug}-{conv.id}"


def export(conv: Conversation, folder: Path | None = None, receipts: list[StoredReceipt] | None = None) -> Path:
    """Write the chat as Markdown to `folder` (vramchat's exports folder by default), its pictures in a
    folder beside it; returns the path."""
    folder = folder or export_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_stem(conv)}.md"
    attachments = [a for m in conv.messages for a in m.attachments]
    media_folder = ""
    if attachments:  # the pictures beside the text, in a folder of their own that the Markdown links to
        from app.attachments import MediaStore

        store = MediaStore()
        media_folder = f"{path.stem}-media"
        (folder / media_folder).mkdir(exist_ok=True)
        for a in attachments:
            if store.has(a):
                shutil.copyfile(store.path_of(a), folder / media_folder / f"{a.id[:16]}{a.suffix}")
    path.write_text(to_markdown(conv, receipts, media_folder), encoding="utf-8", errors="replace")  # any file name
    return path


def export_json(conv: Conversation, folder: Path | None = None, receipts: list[StoredReceipt] | None = None) -> Path:
    """Write the chat as JSON beside its Markdown; returns the path."""
    folder = folder or export_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_stem(conv)}.json"
    path.write_text(
        json.dumps(to_json(conv, receipts), indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
        errors="backslashreplace",
    )
    return path
