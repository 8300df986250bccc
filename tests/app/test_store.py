"""The conversation store: schema version, messages, streaming replies, a crash mid-reply."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.store import SCHEMA_VERSION, Store, StoreError, title_from


def test_a_conversation_round_trips(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation("/m.gguf", "Model", "Be brief.")
    store.add_message(conv.id, "user", "What is the capital of France?")
    reply = store.begin_reply(conv.id)
    store.update_reply(reply, "The capital")
    store.finish_reply(reply, "The capital of France is Paris.", "eos", 8, 12.5)
    store.close()

    again = Store(tmp_path / "c.sqlite3")
    loaded = again.conversation(conv.id)
    assert loaded.title == "What is the capital of France?"
    assert loaded.system_prompt == "Be brief."
    assert [(m.role, m.content, m.state) for m in loaded.messages] == [
        ("user", "What is the capital of France?", "complete"),
        ("assistant", "The capital of France is Paris.", "complete"),
    ]
    assert loaded.messages[1].tokens == 8
    assert again.recovered == 0
    [summary] = again.conversations()
    assert summary.n_messages == 2 and summary.model_name == "Model"


def test_schema_is_versioned(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    Store(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer vramchat"):
        Store(path)


def test_a_corrupt_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        Store(path)


def test_a_stopped_reply_is_partial(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation()
    store.add_message(conv.id, "user", "Tell me a long story")
    reply = store.begin_reply(conv.id)
    store.finish_reply(reply, "Once upon", "user")
    assert store.message(reply).state == "partial"


def test_a_reply_cut_by_a_crash_is_kept(tmp_path: Path) -> None:
    """A process that dies mid-reply (no finish, no close) leaves what it had saved."""
    path = tmp_path / "c.sqlite3"
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from app.store import Store
        store = Store({str(path)!r})
        conv = store.new_conversation("/m.gguf", "Model")
        store.add_message(conv.id, "user", "Count to ten")
        reply = store.begin_reply(conv.id)
        store.update_reply(reply, "one two three")
        os._exit(9)  # dies: no finish_reply, no close
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 9, result.stderr

    store = Store(path)
    assert store.recovered == 1
    conv = store.conversation(store.conversations()[0].id)
    reply = conv.messages[-1]
    assert (reply.role, reply.content, reply.state, reply.stopped_by) == (
        "assistant",
        "one two three",
        "partial",
        "crash",
    )
    # recovered once: the next open finds nothing to recover
    store.close()
    assert Store(path).recovered == 0


def test_retry_deletes_the_reply_and_titles_are_short(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation()
    store.add_message(conv.id, "user", "x " * 100)
    reply = store.begin_reply(conv.id)
    store.delete_message(reply)
    assert [m.role for m in store.conversation(conv.id).messages] == ["user"]
    assert len(store.conversation(conv.id).title) <= 60
    assert title_from("  a\n b  ") == "a b"
    store.delete_conversation(conv.id)
    assert store.conversations() == []


def test_search_finds_chats_by_title_and_message_text(tmp_path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    a = store.new_conversation("/m.gguf", "M", "")
    store.add_message(a.id, "user", "What is 100% of nothing_here?")
    b = store.new_conversation("/m.gguf", "M", "")
    store.add_message(b.id, "user", "Bananas are yellow")
    assert [c.id for c in store.search("BANANA")] == [b.id]
    assert [c.id for c in store.search("100%")] == [a.id]
    assert [c.id for c in store.search("g_h")] == [a.id]  # underscore is a character, not a wildcard
    assert store.search("_") and not store.search("x_y")
    assert store.search("nothing at all") == []


def test_plan_receipts_are_kept_per_load_brought_up_to_date_and_go_with_their_chat(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation("/m.gguf", "Model")
    store.save_receipt(conv.id, "load-1", {"peaks": {"rss": 100}})
    store.save_receipt(conv.id, "load-1", {"peaks": {"rss": 150}})  # the same load: brought up to date
    store.save_receipt(conv.id, "load-2", {"peaks": {"rss": 90}})  # reloaded with a smaller plan: another
    store._db.execute(
        "INSERT INTO receipts (conversation_id, key, body, created, updated) VALUES (?, 'x', '{', 9e9, 9e9)", (conv.id,)
    )
    kept = store.receipts(conv.id)
    assert [(r.key, r.body["peaks"]["rss"]) for r in kept] == [("load-1", 150), ("load-2", 90)]  # unreadable: left out
    assert store.receipt(conv.id, "load-2") is not None and store.receipt(conv.id, "nope") is None
    store.delete_conversation(conv.id)
    assert store.receipts(conv.id) == []


def test_a_database_of_the_first_schema_gains_receipts_and_keeps_its_chats(tmp_path: Path) -> None:
    from app.store import MIGRATIONS

    path = tmp_path / "c.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0] + "\nPRAGMA user_version = 1;")
    db.execute("INSERT INTO conversations (title, created, updated) VALUES ('old chat', 1, 1)")
    db.execute(
        "INSERT INTO messages (conversation_id, role, content, created, updated) VALUES (1, 'user', 'hello', 1, 1)"
    )
    db.commit()
    db.close()
    store = Store(path)
    assert store.version == SCHEMA_VERSION
    assert [m.content for m in store.conversation(1).messages] == ["hello"]
    assert store.receipts(1) == []  # an old chat has none, and says so rather than failing
    store.save_receipt(1, "k", {"model": "Model"})
    assert store.receipts(1)[0].body == {"model": "Model"}


def test_a_model_whose_name_is_not_utf8_is_kept_as_named(tmp_path: Path) -> None:
    """The first message of a chat with b'caf\\xe9.gguf' loaded stopped the app (SQLite refuses such text):
    the chat is saved, and the path comes back as the file system's name, to compare and reload."""
    import os

    model = os.fsdecode(b"/models/caf\xe9.gguf")
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation(model, "tiny-llama")
    store.add_message(conv.id, "user", "Hi")
    store.close()
    again = Store(tmp_path / "c.sqlite3")
    assert again.conversation(conv.id).model_path == model
    assert again.conversations()[0].title == "Hi"
