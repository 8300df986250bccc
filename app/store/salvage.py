"""Opening the conversation store when something is wrong with it; never a silent loss.

- damaged (not a database, or malformed): the file and its -wal/-shm companions are
  moved aside as `conversations.sqlite3.damaged-<time>`, whatever rows can still be
  read from them are copied into a fresh database, and the user is told where the
  old file is and how much was saved;
- locked by another program (another vramchat?), written by a newer vramchat, or in a
  folder that cannot be written: the file is left alone and this session's chats are
  kept in memory only, which the user is told;
- read-only (the file or its folder cannot be written): the chats in it are still shown,
  from a copy in memory, and new ones are kept in memory only.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from app.store import Store, StoreError, db_path

COMPANIONS = ("", "-wal", "-shm", "-journal")
# parents first: messages and receipts refer to conversations, attachments to messages
TABLES = ("conversations", "messages", "attachments", "receipts")


def open_store(path: Path | None = None, busy_timeout: float = 5.0) -> tuple[Store, list[str]]:
    """The store, and what the user must be told about it (empty when all is well)."""
    path = path or db_path()
    try:
        store = Store(path, busy_timeout)
    except StoreError as exc:
        if exc.reason == "unwritable" and path.is_file():
            return _read_only(path, exc)
        if exc.reason != "damaged":
            return Store(":memory:"), [f"{exc}. Chats will be kept in memory only this time; {_advice(exc.reason)}"]
        return _recover_damaged(path, exc, busy_timeout)
    notes = []
    if store.recovered:
        notes.append(
            f"{store.recovered} repl{'ies were' if store.recovered > 1 else 'y was'} cut short when "
            "vramchat last stopped; what was written is kept."
        )
    return store, notes


def _advice(reason: str) -> str:
    return {
        "locked": "close the other vramchat (or the program holding the file) and start again.",
        "newer": "the file is left as it is, your chats are safe in it.",
        "unwritable": "check the permissions of the folder.",
    }.get(reason, "nothing was changed on disk.")


def _read_only(path: Path, exc: StoreError) -> tuple[Store, list[str]]:
    """The chats of a database that cannot be written, in a store in memory: readable, and new chats
    kept there. SQLite cannot open a WAL database read-only where it cannot write the -shm file beside
    it, so the file and its log are copied to a private folder and read from there."""
    try:
        store = read_only_copy(path)
    except (OSError, sqlite3.Error, StoreError):
        return Store(":memory:"), [f"{exc}. Chats will be kept in memory only this time; {_advice(exc.reason)}"]
    n = len(store.conversations(1 << 30))
    return store, [
        f"{exc}. The {n} chat{'' if n == 1 else 's'} in it can be read (Ctrl+B), but nothing new can be "
        f"saved there: chats will be kept in memory only this time; {_advice(exc.reason)}"
    ]


def read_only_copy(path: Path) -> Store:
    """A store in memory holding what `path` holds (its -wal log included), `path` left untouched."""
    with tempfile.TemporaryDirectory(prefix="vramchat-read-only-") as folder:
        copy = Path(folder) / path.name
        for suffix in ("", "-wal"):
            if Path(f"{path}{suffix}").is_file():
                shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
        source = sqlite3.connect(copy)
        try:
            store = Store(":memory:")
            try:
                source.backup(store._db)  # the whole database, its schema version included
                store._migrate()  # an older schema brought up to date (a newer one is refused)
                store.recovered = store._recover_interrupted()
            except BaseException:
                store.close()
                raise
        finally:
            source.close()
    return store


def _recover_damaged(path: Path, exc: StoreError, busy_timeout: float) -> tuple[Store, list[str]]:
    try:
        aside = set_aside(path)
    except OSError as move_error:
        return Store(":memory:"), [
            f"{exc}. It could not be moved aside ({move_error.strerror or move_error}); "
            "chats will be kept in memory only this time."
        ]
    try:
        store = Store(path, busy_timeout)
    except StoreError as again:
        return Store(":memory:"), [
            f"{exc}. It was moved to {aside}, but a new database could not be started "
            f"({again}); chats will be kept in memory only this time."
        ]
    saved = salvage(aside, store)
    what = (
        f"{saved['messages']} messages in {saved['conversations']} chats were saved from it"
        if saved["conversations"]
        else "nothing could be read from it"
    )
    return store, [
        f"The conversation database was damaged ({exc}). It was kept as {aside}; "
        f"{what}, and a new database was started."
    ]


def set_aside(path: Path) -> Path:
    """Move the database and its companions to `<name>.damaged-<time>`; returns the new main file."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    for suffix in COMPANIONS:
        src = Path(f"{path}{suffix}")
        if src.exists():
            os.replace(src, f"{aside}{suffix}")
    return aside


def salvage(damaged: Path, store: Store) -> dict[str, int]:
    """Copy every row that can still be read from a damaged database into `store`, table by table."""
    counts = dict.fromkeys(TABLES, 0)
    try:
        src = sqlite3.connect(f"file:{damaged}?mode=ro", uri=True)
    except sqlite3.Error:
        return counts
    try:
        for table in TABLES:
            counts[table] = _copy_rows(src, store, table)
    finally:
        src.close()
    return counts


def _adopt(db: sqlite3.Connection, conv_id: int) -> bool:
    """A stand-in for a chat whose row was lost, so that its messages are kept."""
    if db.execute("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)).fetchone():
        return False
    now = time.time()
    db.execute(
        "INSERT INTO conversations (id, title, created, updated) VALUES (?, '(recovered)', ?, ?)", (conv_id, now, now)
    )
    return True


def _copy_rows(src: sqlite3.Connection, store: Store, table: str) -> int:
    db = store._db  # the store's own connection: the copy is one transaction
    try:
        columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        cursor = src.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY id")
    except sqlite3.Error:
        return 0
    copied = 0
    placeholders = ", ".join("?" for _ in columns)
    db.execute("BEGIN")
    try:
        while True:
            try:
                row = cursor.fetchone()
            except sqlite3.Error:
                break  # the rest of the table is unreadable
            if row is None:
                break
            insert = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})"
            try:
                db.execute(insert, row)
                copied += 1
            except sqlite3.IntegrityError:
                if table == "messages" and _adopt(db, row[columns.index("conversation_id")]):
                    db.execute(insert, row)  # its chat was lost: kept in a "(recovered)" chat
                    copied += 1
            except sqlite3.Error:
                continue
    finally:
        db.execute("COMMIT")
    return copied
