"""Conversations in SQLite under the user data folder.

The room: this module the store; salvage.py a store that cannot be opened (damaged: set aside, its rows copied anew),
receipt.py a chat's plan receipt kept in its receipts table, export.py a chat as Markdown or JSON,
tree.py the active path through a chat's branches.

A chat is a tree (schema 4): each message names its parent (NULL for the first). Editing an earlier
message adds a sibling of it, a retry adds a sibling reply; the siblings are alternatives. Which one
is on screen is the one chosen last (`chosen`, a counter raised on each choice), so every branch
point keeps its own choice and the conversation is the path that follows them (tree.active_path).
Deleting a chat marks it deleted (`deleted`, the time) so it can be restored; marked chats are
removed for good on the next open.

Every message is written when it is sent or completed; a reply being streamed is
written as it grows (the caller decides how often), with state 'streaming'. On the
next open, any reply still marked 'streaming' was cut short by a crash: it is kept
and marked 'partial'. The schema is versioned with PRAGMA user_version; `MIGRATIONS`
holds the steps from each version to the next.

One connection serves the app; every call takes a lock, so the generation worker
can save the growing reply while the UI thread reads.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.attachments import Attachment
from app.errors import VramchatError
from app.paths import data_dir
from app.store.tree import active_path, place_among_siblings

DB_FILE = "conversations.sqlite3"
SCHEMA_VERSION = 5
TITLE_CHARS = 60

# MIGRATIONS[n] takes a database from version n to n + 1.
MIGRATIONS: dict[int, str] = {
    0: """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        model_path TEXT NOT NULL DEFAULT '',
        model_name TEXT NOT NULL DEFAULT '',
        system_prompt TEXT NOT NULL DEFAULT '',
        created REAL NOT NULL,
        updated REAL NOT NULL
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
        content TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'complete' CHECK (state IN ('complete', 'streaming', 'partial')),
        stopped_by TEXT NOT NULL DEFAULT '',
        tokens INTEGER NOT NULL DEFAULT 0,
        tokens_per_second REAL NOT NULL DEFAULT 0,
        created REAL NOT NULL,
        updated REAL NOT NULL
    );
    CREATE INDEX messages_by_conversation ON messages (conversation_id, id);
    CREATE INDEX conversations_by_update ON conversations (updated);
    """,
    # images and sounds sent with a message: the files are kept by content (app.attachments.MediaStore)
    1: """
    CREATE TABLE attachments (
        id INTEGER PRIMARY KEY,
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'image' CHECK (kind IN ('image', 'audio')),
        bytes INTEGER NOT NULL DEFAULT 0,
        width INTEGER NOT NULL DEFAULT 0,
        height INTEGER NOT NULL DEFAULT 0,
        suffix TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX attachments_by_message ON attachments (message_id, position);
    """,
    # plan receipts: what each chat ran with (app.store.receipt), one per load, as JSON
    2: """
    CREATE TABLE receipts (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        body TEXT NOT NULL,
        created REAL NOT NULL,
        updated REAL NOT NULL,
        UNIQUE (conversation_id, key)
    );
    """,
    # the chat as a tree (parent_id; chosen: the alternative on screen at each branch point), the reply's
    # load (receipt_key, for the receipts of the branch on screen), the chat's own sampling (settings,
    # JSON: app.conversation.sampling) and deletion that can be undone (deleted: when, 0 for a live chat)
    3: """
    ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE;
    ALTER TABLE messages ADD COLUMN chosen INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN receipt_key TEXT NOT NULL DEFAULT '';
    UPDATE messages SET chosen = id, parent_id = (SELECT MAX(p.id) FROM messages p
        WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id);
    CREATE INDEX messages_by_parent ON messages (parent_id);
    ALTER TABLE conversations ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE conversations ADD COLUMN deleted REAL NOT NULL DEFAULT 0;
    """,
    # the sampling each reply ran with (JSON: app.conversation.sampling.sampling_json; '' before version 5)
    4: """
    ALTER TABLE messages ADD COLUMN sampling TEXT NOT NULL DEFAULT '';
    """,
}


class StoreError(VramchatError, RuntimeError):
    """The conversation database cannot be used; the message says why.

    `reason`: damaged (not a database, or malformed), locked (another program holds it),
    newer (written by a later vramchat), unwritable (the folder or file cannot be written),
    missing (no such conversation).
    """

    title = "The chat history"

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _reason(exc: sqlite3.DatabaseError) -> str:
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return "locked"
    if "unable to open" in text or "readonly" in text or "read-only" in text or "disk i/o" in text:
        return "unwritable"
    return "damaged"


@dataclass(frozen=True)
class StoredMessage:
    id: int
    conversation_id: int
    role: str
    content: str
    state: str = "complete"  # complete, streaming (being written), partial (cut short)
    stopped_by: str = ""
    tokens: int = 0
    tokens_per_second: float = 0.0
    attachments: tuple[Attachment, ...] = ()
    parent_id: int | None = None  # the message it answers or follows (None: the chat's first)
    chosen: int = 0  # raised each time it is chosen among its alternatives (app.store.tree)
    receipt_key: str = ""  # a reply: the load that wrote it (its plan receipt's key)
    alternative: int = 1  # its place among the alternatives at its branch point, from 1
    alternatives: int = 1  # how many there are (1: no branch here)
    sampling: dict[str, Any] | None = None  # a reply: what it was sampled with (None: not kept, an older reply)


@dataclass
class Conversation:
    id: int
    title: str
    model_path: str
    model_name: str
    system_prompt: str
    created: float
    updated: float
    messages: list[StoredMessage] = field(default_factory=list)  # the path on screen (app.store.tree)
    settings: dict[str, Any] = field(default_factory=dict)  # the chat's own sampling (app.conversation.sampling)


@dataclass(frozen=True)
class StoredReceipt:
    """A plan receipt kept with a chat (app.store.receipt builds and reads its body)."""

    conversation_id: int
    key: str
    body: dict[str, Any]
    created: float
    updated: float


@dataclass(frozen=True)
class ConversationSummary:
    id: int
    title: str
    model_name: str
    updated: float
    n_messages: int
    created: float = 0.0


def db_path() -> Path:
    return data_dir() / DB_FILE


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


class Store:
    def __init__(self, path: Path | str | None = None, busy_timeout: float = 5.0) -> None:
        self.path = Path(path) if path is not None else db_path()
        self._lock = threading.RLock()
        self.recovered = 0  # replies found cut short by a crash when the store was opened
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=busy_timeout)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
            self.recovered = self._recover_interrupted()
            self._purge_deleted()
        except StoreError:
            self._close_quietly()
            raise
        except sqlite3.DatabaseError as exc:
            self._close_quietly()
            raise StoreError(f"cannot open the conversation database {self.path}: {exc}", _reason(exc)) from None
        except OSError as exc:
            raise StoreError(f"cannot create {self.path.parent}: {exc.strerror or exc}", "unwritable") from None

    def _close_quietly(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            with suppress(sqlite3.Error):
                db.close()

    # -- schema ---------------------------------------------------------------------------

    @property
    def version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        version = self.version
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer vramchat (schema {version}, "
                f"this one knows {SCHEMA_VERSION}); upgrade vramchat",
                "newer",
            )
        while version < SCHEMA_VERSION:
            script = MIGRATIONS[version]
            # executescript commits first; the version bump is part of the same script
            self._db.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {version + 1};\nCOMMIT;")
            version += 1

    def _recover_interrupted(self) -> int:
        with self._tx() as db:
            cur = db.execute("UPDATE messages SET state = 'partial', stopped_by = 'crash' WHERE state = 'streaming'")
            return cur.rowcount

    def _purge_deleted(self) -> None:
        """Chats deleted in an earlier run (their undo is over) go for good."""
        with self._tx() as db:
            db.execute("DELETE FROM conversations WHERE deleted > 0")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- conversations ----------------------------------------------------------------------

    def new_conversation(
        self, model_path: str = "", model_name: str = "", system_prompt: str = "", title: str = ""
    ) -> Conversation:
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO conversations (title, model_path, model_name, system_prompt, created, "
                "updated) VALUES (?, ?, ?, ?, ?, ?)",
                (title, _path_value(model_path), model_name, system_prompt, now, now),
            )
            conv_id = int(cur.lastrowid or 0)
        return Conversation(conv_id, title, model_path, model_name, system_prompt, now, now)

    def conversations(self, limit: int = 500) -> list[ConversationSummary]:
        with self._lock:
            rows = self._db.execute(
                "SELECT c.id, c.title, c.model_name, c.updated, c.created, COUNT(m.id) AS n FROM conversations c "
                "LEFT JOIN messages m ON m.conversation_id = c.id WHERE c.deleted = 0 GROUP BY c.id "
                "ORDER BY c.updated DESC, c.id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [_summary(r) for r in rows]

    def search(self, text: str, limit: int = 200) -> list[ConversationSummary]:
        """Chats whose title or any message holds `text` (case-insensitive), newest first."""
        needle = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._lock:
            rows = self._db.execute(
                "SELECT c.id, c.title, c.model_name, c.updated, c.created, "
                "(SELECT COUNT(*) FROM messages m2 WHERE m2.conversation_id = c.id) AS n FROM conversations c "
                "WHERE c.deleted = 0 AND (c.title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m WHERE "
                "m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\') OR EXISTS (SELECT 1 FROM attachments a "
                "JOIN messages m3 ON m3.id = a.message_id WHERE m3.conversation_id = c.id AND a.name LIKE ? "
                "ESCAPE '\\')) ORDER BY c.updated DESC, c.id DESC LIMIT ?",
                (needle, needle, needle, limit),
            ).fetchall()
        return [_summary(r) for r in rows]

    def conversation(self, conv_id: int) -> Conversation:
        with self._lock:
            row = self._db.execute("SELECT * FROM conversations WHERE id = ?", (conv_id,)).fetchone()
            if row is None:
                raise StoreError(f"conversation {conv_id} does not exist", "missing")
            msgs = self._db.execute(
                "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conv_id,)
            ).fetchall()
            attached = self._attachments(
                "SELECT a.* FROM attachments a JOIN messages m ON m.id = a.message_id WHERE m.conversation_id = ? "
                "ORDER BY a.message_id, a.position",
                (conv_id,),
            )
        every = [_message(m, attached.get(m["id"], ())) for m in msgs]
        return Conversation(
            row["id"],
            row["title"],
            _path_from(row["model_path"]),
            row["model_name"],
            row["system_prompt"],
            row["created"],
            row["updated"],
            [_placed(every, m) for m in active_path(every)],
            _settings_from(row["settings"]),
        )

    def _attachments(self, query: str, args: tuple[object, ...]) -> dict[int, tuple[Attachment, ...]]:
        out: dict[int, list[Attachment]] = {}
        for r in self._db.execute(query, args).fetchall():
            a = Attachment(r["sha256"], r["name"], r["kind"], r["bytes"], r["width"], r["height"], r["suffix"])
            out.setdefault(r["message_id"], []).append(a)
        return {k: tuple(v) for k, v in out.items()}

    def set_system_prompt(self, conv_id: int, text: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE conversations SET system_prompt = ?, updated = ? WHERE id = ?", (text, time.time(), conv_id)
            )

    def set_settings(self, conv_id: int, settings: dict[str, Any]) -> None:
        """The chat's own sampling and switches (app.conversation.sampling reads and writes them)."""
        with self._tx() as db:
            db.execute("UPDATE conversations SET settings = ? WHERE id = ?", (json.dumps(settings), conv_id))

    def set_title(self, conv_id: int, title: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conv_id))

    def delete_conversation(self, conv_id: int) -> None:
        """Gone at once, with its messages and receipts (the UI uses trash_conversation, which can be undone)."""
        with self._tx() as db:
            db.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))

    def trash_conversation(self, conv_id: int) -> None:
        """Out of the lists until restore_conversation; gone for good when the store is next opened."""
        with self._tx() as db:
            db.execute("UPDATE conversations SET deleted = ? WHERE id = ?", (time.time(), conv_id))

    def restore_conversation(self, conv_id: int) -> None:
        with self._tx() as db:
            db.execute("UPDATE conversations SET deleted = 0 WHERE id = ?", (conv_id,))

    # -- messages ---------------------------------------------------------------------------

    def add_message(
        self,
        conv_id: int,
        role: str,
        content: str,
        attachments: tuple[Attachment, ...] = (),
        beside: int | None = None,
    ) -> StoredMessage:
        """A complete message (the user's, or a system note), with the images it carries (their files are
        kept by app.attachments.MediaStore), after the last message on screen, or (`beside`, an edit) as an
        alternative to that message; the first user message names the chat."""
        now = time.time()
        with self._tx() as db:
            parent = self._parent_for(db, conv_id, beside)
            cur = db.execute(
                "INSERT INTO messages (conversation_id, role, content, created, updated, parent_id, chosen) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conv_id, role, content, now, now, parent, self._next_choice(db, conv_id)),
            )
            msg_id = int(cur.lastrowid or 0)
            for position, a in enumerate(attachments):
                db.execute(
                    "INSERT INTO attachments (message_id, position, sha256, name, kind, bytes, width, height, suffix) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (msg_id, position, a.id, a.name, a.kind, a.size, a.width, a.height, a.suffix),
                )
            db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conv_id))
            if role == "user":
                title = title_from(content) or title_from(", ".join(a.name for a in attachments))
                if title and db.execute("SELECT title FROM conversations WHERE id = ?", (conv_id,)).fetchone()[0] == "":
                    db.execute(
                        "UPDATE conversations SET title = ? WHERE id = ?", (_distinct(db, conv_id, title), conv_id)
                    )
        return StoredMessage(msg_id, conv_id, role, content, attachments=tuple(attachments), parent_id=parent)

    def begin_reply(self, conv_id: int, beside: int | None = None, sampling: dict[str, Any] | None = None) -> int:
        """An empty assistant message in state 'streaming', after the last message on screen or (`beside`,
        a retry) as an alternative to that reply, with the sampling it runs with; returns its id."""
        now = time.time()
        kept = json.dumps(sampling) if sampling is not None else ""
        with self._tx() as db:
            parent = self._parent_for(db, conv_id, beside)
            cur = db.execute(
                "INSERT INTO messages (conversation_id, role, content, state, created, updated, parent_id, chosen, "
                "sampling) VALUES (?, 'assistant', '', 'streaming', ?, ?, ?, ?, ?)",
                (conv_id, now, now, parent, self._next_choice(db, conv_id), kept),
            )
            db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conv_id))
            return int(cur.lastrowid or 0)

    def update_reply(self, msg_id: int, content: str) -> None:
        """Save the reply streamed so far (called periodically while it grows)."""
        with self._tx() as db:
            db.execute(
                "UPDATE messages SET content = ?, updated = ? WHERE id = ? AND state = 'streaming'",
                (content, time.time(), msg_id),
            )

    def finish_reply(
        self, msg_id: int, content: str, stopped_by: str = "", tokens: int = 0, tokens_per_second: float = 0.0
    ) -> None:
        """The reply is done: 'complete' when the model ended it, 'partial' when it was cut short."""
        state = "partial" if stopped_by in ("user", "error", "crash", "engine_crash") else "complete"
        with self._tx() as db:
            db.execute(
                "UPDATE messages SET content = ?, state = ?, stopped_by = ?, tokens = ?, "
                "tokens_per_second = ?, updated = ? WHERE id = ?",
                (content, state, stopped_by, tokens, tokens_per_second, time.time(), msg_id),
            )

    def delete_message(self, msg_id: int) -> None:
        """The message and what followed it on its branch (the alternative chosen before it is on screen again)."""
        with self._tx() as db:
            db.execute("DELETE FROM messages WHERE id = ?", (msg_id,))

    # -- branches ----------------------------------------------------------------------------

    def _parent_for(self, db: sqlite3.Connection, conv_id: int, beside: int | None) -> int | None:
        """The parent of a new message: that of `beside` (an alternative to it), else the last on screen."""
        if beside is not None:
            row = db.execute("SELECT parent_id FROM messages WHERE id = ?", (beside,)).fetchone()
            if row is None:
                raise StoreError(f"message {beside} does not exist", "missing")
            return row["parent_id"]  # type: ignore[no-any-return]
        rows = db.execute("SELECT * FROM messages WHERE conversation_id = ?", (conv_id,)).fetchall()
        path = active_path([_message(r) for r in rows])
        return path[-1].id if path else None

    @staticmethod
    def _next_choice(db: sqlite3.Connection, conv_id: int) -> int:
        row = db.execute("SELECT MAX(chosen) FROM messages WHERE conversation_id = ?", (conv_id,)).fetchone()
        return int(row[0] or 0) + 1

    def alternatives(self, msg_id: int) -> list[StoredMessage]:
        """The message and its alternatives (the messages beside it at its branch point), oldest first."""
        with self._lock:
            row = self._db.execute("SELECT conversation_id, parent_id FROM messages WHERE id = ?", (msg_id,)).fetchone()
            if row is None:
                return []
            rows = self._db.execute(
                "SELECT * FROM messages WHERE conversation_id = ? AND parent_id IS ? ORDER BY id",
                (row["conversation_id"], row["parent_id"]),
            ).fetchall()
        return [_message(r) for r in rows]

    def choose(self, msg_id: int) -> None:
        """Put this alternative on screen at its branch point (the choices further down are kept)."""
        with self._tx() as db:
            row = db.execute("SELECT conversation_id FROM messages WHERE id = ?", (msg_id,)).fetchone()
            if row is None:
                raise StoreError(f"message {msg_id} does not exist", "missing")
            db.execute("UPDATE messages SET chosen = ? WHERE id = ?", (self._next_choice(db, row[0]), msg_id))

    def step_alternative(self, msg_id: int, step: int) -> StoredMessage | None:
        """Choose the alternative `step` places from this one (-1 the one before); None at either end."""
        siblings = self.alternatives(msg_id)
        ids = [m.id for m in siblings]
        if msg_id not in ids:
            return None
        at = ids.index(msg_id) + step
        if not 0 <= at < len(ids):
            return None
        self.choose(ids[at])
        return siblings[at]

    def set_reply_receipt(self, msg_id: int, key: str) -> None:
        """The load that wrote this reply (so the receipts shown are those of the branch on screen)."""
        with self._tx() as db:
            db.execute("UPDATE messages SET receipt_key = ? WHERE id = ?", (key, msg_id))

    # -- plan receipts ------------------------------------------------------------------------

    def save_receipt(self, conv_id: int, key: str, body: dict[str, Any]) -> None:
        """Keep (or bring up to date) the receipt of one load this chat ran on."""
        now = time.time()
        text = json.dumps(body, sort_keys=True)
        with self._tx() as db:
            db.execute(
                "INSERT INTO receipts (conversation_id, key, body, created, updated) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (conversation_id, key) DO UPDATE SET body = excluded.body, updated = excluded.updated",
                (conv_id, key, text, now, now),
            )

    def receipts(self, conv_id: int) -> list[StoredReceipt]:
        """The chat's receipts, oldest first (a body that cannot be read is left out, never an error)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM receipts WHERE conversation_id = ? ORDER BY created, id", (conv_id,)
            ).fetchall()
        out = []
        for r in rows:
            try:
                body = json.loads(r["body"])
            except ValueError:
                continue
            if isinstance(body, dict):
                out.append(StoredReceipt(r["conversation_id"], r["key"], body, r["created"], r["updated"]))
        return out

    def branch_receipts(self, conv: Conversation) -> list[StoredReceipt]:
        """The receipts of the loads that wrote the replies on screen; a chat whose replies name no load
        (written before schema 4) keeps all of its own."""
        every = self.receipts(conv.id)
        with self._lock:
            named = self._db.execute(
                "SELECT 1 FROM messages WHERE conversation_id = ? AND receipt_key != '' LIMIT 1", (conv.id,)
            ).fetchone()
        if named is None:
            return every
        keys = {m.receipt_key for m in conv.messages if m.receipt_key}
        return [r for r in every if r.key in keys]

    def receipt(self, conv_id: int, key: str) -> StoredReceipt | None:
        return next((r for r in self.receipts(conv_id) if r.key == key), None)

    def message(self, msg_id: int) -> StoredMessage | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM messages WHERE id = ?", (msg_id,)).fetchone()
            attached = self._attachments("SELECT * FROM attachments WHERE message_id = ? ORDER BY position", (msg_id,))
        return _message(row, attached.get(msg_id, ())) if row is not None else None


def _path_value(path: str) -> str | bytes:
    """A model's path as SQLite can keep it: text, or the name's bytes where the file system's name is
    not UTF-8 (SQLite refuses such text; a TEXT column keeps a blob as it is)."""
    try:
        path.encode()
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def _path_from(value: str | bytes) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else value


def _message(row: sqlite3.Row, attachments: tuple[Attachment, ...] = ()) -> StoredMessage:
    return StoredMessage(
        row["id"],
        row["conversation_id"],
        row["role"],
        row["content"],
        row["state"],
        row["stopped_by"],
        row["tokens"],
        row["tokens_per_second"],
        attachments,
        row["parent_id"],
        row["chosen"],
        row["receipt_key"],
        sampling=_sampling(row["sampling"]),
    )


def _sampling(text: str) -> dict[str, Any] | None:
    """A reply's sampling as kept (JSON); None where none was kept or it cannot be read."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _placed(every: list[StoredMessage], message: StoredMessage) -> StoredMessage:
    at, count = place_among_siblings(every, message)
    return replace(message, alternative=at, alternatives=count)


def _summary(row: sqlite3.Row) -> ConversationSummary:
    return ConversationSummary(row["id"], row["title"], row["model_name"], row["updated"], row["n"], row["created"])


def _settings_from(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:  # a hand-edited file: the defaults, never an error
        return {}
    return value if isinstance(value, dict) else {}


def _distinct(db: sqlite3.Connection, conv_id: int, title: str) -> str:
    """`title`, or "title (2)" and so on when another chat already has it (two chats from one pasted text)."""
    taken = {
        r[0]
        for r in db.execute(
            "SELECT title FROM conversations WHERE id != ? AND deleted = 0 AND substr(title, 1, ?) = ?",
            (conv_id, len(title), title),
        )
    }
    if title not in taken:
        return title
    n = 2
    while f"{title} ({n})" in taken:
        n += 1
    return f"{title} ({n})"
