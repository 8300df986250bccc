"""A damaged, locked, newer or unreachable conversation database: a clear message, a way out, nothing lost."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from app.store import Store
from app.store.salvage import open_store, salvage

PAGE = 4096


def _filled(path: Path, chats: int = 40, per_chat: int = 10) -> None:
    store = Store(path)
    for i in range(chats):
        conv = store.new_conversation("/m.gguf", "Model")
        for j in range(per_chat):
            store.add_message(conv.id, "user", f"question {i}.{j} " + "x" * 300)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    store.close()


def test_garbage_is_set_aside_and_a_new_database_started(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    store, notes = open_store(path)
    assert len(notes) == 1 and "damaged" in notes[0] and "nothing could be read" in notes[0]
    aside = [p for p in tmp_path.iterdir() if ".damaged-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes() == garbage  # the broken file is kept, as it was
    assert str(aside[0]) in notes[0]
    conv = store.new_conversation()
    store.add_message(conv.id, "user", "hello")  # the new database works
    assert store.path == path


def test_a_malformed_database_gives_back_what_it_can(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    _filled(path)
    data = bytearray(path.read_bytes())
    n_pages = len(data) // PAGE
    for page in range(n_pages * 2 // 3, n_pages - 4):  # some of the messages' pages
        data[page * PAGE : (page + 1) * PAGE] = os.urandom(PAGE)
    path.write_bytes(bytes(data))

    store, notes = open_store(path)
    assert "damaged" in notes[0] and "saved from it" in notes[0]
    saved = sum(c.n_messages for c in store.conversations())
    assert 0 < saved < 400
    assert f"{saved} messages" in notes[0]
    first = store.conversation(store.conversations(500)[-1].id)
    assert first.messages[0].content.startswith("question 0.0 ")
    aside = next(p for p in tmp_path.iterdir() if ".damaged-" in p.name and not p.name.endswith(("-wal", "-shm")))
    assert aside.read_bytes() == bytes(data)


def test_messages_whose_chat_was_lost_are_kept(tmp_path: Path) -> None:
    source = tmp_path / "damaged.sqlite3"
    _filled(source, chats=2, per_chat=2)
    db = sqlite3.connect(source)
    db.execute("PRAGMA foreign_keys = OFF")
    db.execute("DELETE FROM conversations WHERE id = 2")  # as if its page were lost
    db.commit()
    db.close()
    store = Store(tmp_path / "new.sqlite3")
    assert salvage(source, store) == {"conversations": 1, "messages": 4, "attachments": 0, "receipts": 0}
    recovered = [c for c in store.conversations() if c.title == "(recovered)"]
    assert len(recovered) == 1 and recovered[0].n_messages == 2


def test_a_locked_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    _filled(path, chats=2, per_chat=1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        store, notes = open_store(path, busy_timeout=0.2)
        assert "locked" in notes[0] and "close the other vramchat" in notes[0]
        assert "memory only" in notes[0]
        store.add_message(store.new_conversation().id, "user", "kept in memory")  # the session still works
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not [p for p in tmp_path.iterdir() if ".damaged-" in p.name]
    store, notes = open_store(path)
    assert notes == [] and len(store.conversations()) == 2  # nothing was lost or moved


def test_a_newer_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    _filled(path, chats=1, per_chat=1)
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    before = path.read_bytes()
    _store, notes = open_store(path)
    assert "newer vramchat" in notes[0] and "upgrade" in notes[0]
    assert path.read_bytes() == before


def test_an_unreachable_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the folder should be")
    store, notes = open_store(blocker / "conversations.sqlite3")
    assert "cannot create" in notes[0] and "memory only" in notes[0]
    store.new_conversation()


def test_receipts_are_salvaged_with_their_chats(tmp_path: Path) -> None:
    source = tmp_path / "damaged.sqlite3"
    _filled(source, chats=2, per_chat=1)
    old = Store(source)
    old.save_receipt(1, "load", {"peaks": {"rss": 42}})
    old._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    old.close()
    store = Store(tmp_path / "new.sqlite3")
    assert salvage(source, store) == {"conversations": 2, "messages": 2, "attachments": 0, "receipts": 1}
    assert store.receipts(1)[0].body == {"peaks": {"rss": 42}}


@pytest.fixture
def read_only_folder(tmp_path: Path):
    """A data folder whose database and folder cannot be written, even by root (chattr +i): what a
    read-only mount or a folder of another user's looks like to vramchat."""
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "conversations.sqlite3"
    store = Store(path)
    for i in range(3):
        store.add_message(store.new_conversation("/m.gguf", "Model").id, "user", f"question {i}")
    reply = store.begin_reply(1)
    store.update_reply(reply, "cut short")  # a reply that was being written, still in the -wal log
    store._db.close()  # as a crash leaves it: no checkpoint, the -wal kept
    frozen = [p for p in folder.iterdir()] + [folder]
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", *map(str, frozen)]).returncode != 0:
        pytest.skip("chattr +i is not available here")
    yield path
    subprocess.run(["chattr", "-i", *map(str, frozen)], check=True)


def test_a_read_only_database_still_shows_its_chats(read_only_folder: Path) -> None:
    """A read-only data folder was said clearly, but Ctrl+B showed no chats though the database held
    three: they are read from a copy in memory, and the file is left as it was."""
    before = {p.name: p.read_bytes() for p in read_only_folder.parent.iterdir()}
    store, notes = open_store(read_only_folder)
    assert len(notes) == 1 and "The 3 chats in it can be read" in notes[0] and "memory only" in notes[0]
    assert sorted(c.title for c in store.conversations()) == ["question 0", "question 1", "question 2"]
    assert store.conversation(1).messages[-1].content == "cut short"  # from the log, marked cut short
    assert store.conversation(1).messages[-1].state == "partial"
    store.add_message(store.new_conversation().id, "user", "kept in memory")  # the session still works
    assert {p.name: p.read_bytes() for p in read_only_folder.parent.iterdir()} == before
