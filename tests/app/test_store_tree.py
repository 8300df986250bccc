"""The chat as a tree: edits and retries kept as alternatives, the path on screen, the schema 3 -> 4
migration that keeps every chat, deletion that can be undone, titles that tell chats apart."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.attachments import Attachment
from app.store import MIGRATIONS, SCHEMA_VERSION, Store
from app.store.export import to_json, to_markdown


def _turn(store: Store, conv_id: int, question: str, answer: str) -> tuple[int, int]:
    asked = store.add_message(conv_id, "user", question)
    reply = store.begin_reply(conv_id)
    store.finish_reply(reply, answer, "eos")
    return asked.id, reply


def test_an_edited_message_is_a_branch_and_the_first_stays_reachable(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation()
    _turn(store, conv.id, "one", "reply one")
    second, _ = _turn(store, conv.id, "two", "reply two")
    _turn(store, conv.id, "three", "reply three")

    edited = store.add_message(conv.id, "user", "two, edited", beside=second)
    reply = store.begin_reply(conv.id)
    store.finish_reply(reply, "reply to the edit", "eos")
    shown = store.conversation(conv.id).messages
    assert [m.content for m in shown] == ["one", "reply one", "two, edited", "reply to the edit"]
    assert (shown[2].alternative, shown[2].alternatives) == (2, 2)

    back = store.step_alternative(edited.id, -1)
    assert back is not None and back.id == second
    shown = store.conversation(conv.id).messages  # the first branch, whole, with its own later turns
    assert [m.content for m in shown] == ["one", "reply one", "two", "reply two", "three", "reply three"]
    assert (shown[2].alternative, shown[2].alternatives) == (1, 2)
    assert store.step_alternative(second, -1) is None  # the first of its alternatives
    store.step_alternative(second, +1)
    assert store.conversation(conv.id).messages[-1].content == "reply to the edit"
    assert store.conversation(conv.id).title == "one"  # an edit does not rename the chat


def test_a_retry_keeps_the_earlier_replies_as_alternatives(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation()
    _, first = _turn(store, conv.id, "hi", "hello")
    second = store.begin_reply(conv.id, beside=first)
    store.finish_reply(second, "hey there", "eos")
    [_asked, reply] = store.conversation(conv.id).messages
    assert (reply.content, reply.alternative, reply.alternatives) == ("hey there", 2, 2)
    assert [m.content for m in store.alternatives(second)] == ["hello", "hey there"]
    store.step_alternative(second, -1)
    assert store.conversation(conv.id).messages[-1].content == "hello"

    # a retry stopped before its first token is deleted: the reply chosen before it is on screen again
    empty = store.begin_reply(conv.id, beside=first)
    store.delete_message(empty)
    assert store.conversation(conv.id).messages[-1].content == "hello"
    # the next message follows the reply on screen
    store.add_message(conv.id, "user", "and then?")
    assert store.conversation(conv.id).messages[-1].parent_id == first


def test_export_and_receipts_follow_the_branch_on_screen(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation("/m.gguf", "Model")
    _, first = _turn(store, conv.id, "hi", "from the first load")
    store.set_reply_receipt(first, "load-1")
    store.save_receipt(conv.id, "load-1", {"model": "Model", "n": 1})
    second = store.begin_reply(conv.id, beside=first)
    store.finish_reply(second, "from the second load", "eos")
    store.set_reply_receipt(second, "load-2")
    store.save_receipt(conv.id, "load-2", {"model": "Model", "n": 2})

    shown = store.conversation(conv.id)
    assert [r.body["n"] for r in store.branch_receipts(shown)] == [2]
    data = to_json(shown, store.branch_receipts(shown))
    assert [m["content"] for m in data["messages"]] == ["hi", "from the second load"]
    assert data["receipts"] == [{"model": "Model", "n": 2}]
    store.step_alternative(second, -1)
    shown = store.conversation(conv.id)
    text = to_markdown(shown, store.branch_receipts(shown))
    assert "from the first load" in text and "from the second load" not in text
    assert [r.body["n"] for r in store.branch_receipts(shown)] == [1]


def test_a_version_3_database_keeps_every_chat_and_attachment(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    db = sqlite3.connect(path)
    for version in range(3):
        db.executescript(MIGRATIONS[version])
    db.executescript("PRAGMA user_version = 3;")
    for conv_id in (1, 2):
        db.execute(
            "INSERT INTO conversations (id, title, system_prompt, created, updated) VALUES (?, ?, 'Be brief.', 1, 1)",
            (conv_id, f"old chat {conv_id}"),
        )
    rows = [
        (1, "user", "hello"),
        (1, "assistant", "hi"),
        (2, "user", "picture?"),
        (1, "user", "again"),
        (1, "assistant", "yes"),
    ]
    for conv_id, role, content in rows:
        db.execute(
            "INSERT INTO messages (conversation_id, role, content, created, updated) VALUES (?, ?, ?, 1, 1)",
            (conv_id, role, content),
        )
    db.execute(
        "INSERT INTO attachments (message_id, position, sha256, name, kind, bytes, width, height, suffix) "
        "VALUES (3, 0, 'abc', 'cat.png', 'image', 10, 2, 2, '.png')"
    )
    db.execute(
        "INSERT INTO receipts (conversation_id, key, body, created, updated) VALUES (1, 'k', '{\"n\": 1}', 1, 1)"
    )
    db.commit()
    db.close()

    store = Store(path)
    assert store.version == SCHEMA_VERSION == 5
    one, two = store.conversation(1), store.conversation(2)
    assert [(m.role, m.content) for m in one.messages] == [
        ("user", "hello"),
        ("assistant", "hi"),
        ("user", "again"),
        ("assistant", "yes"),
    ]
    assert all(m.alternatives == 1 for m in one.messages) and one.system_prompt == "Be brief."
    assert two.messages[0].attachments == (Attachment("abc", "cat.png", "image", 10, 2, 2, ".png"),)
    assert [r.body for r in store.branch_receipts(one)] == [{"n": 1}]  # replies from before name no load
    assert one.settings == {}
    # the old chat goes on as a tree: a retry of its last reply
    retry = store.begin_reply(1, beside=one.messages[-1].id)
    store.finish_reply(retry, "yes, again", "eos")
    assert [m.content for m in store.conversation(1).messages][-2:] == ["again", "yes, again"]


def test_a_deleted_chat_can_be_restored_until_the_store_is_opened_again(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    store = Store(path)
    conv = store.new_conversation()
    _turn(store, conv.id, "keep me", "kept")
    store.trash_conversation(conv.id)
    assert store.conversations() == [] and store.search("keep") == []
    store.restore_conversation(conv.id)
    assert [c.title for c in store.conversations()] == ["keep me"]
    store.trash_conversation(conv.id)
    store.close()
    again = Store(path)
    assert again.conversations() == []
    assert again._db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


def test_chats_from_one_pasted_text_get_titles_that_tell_them_apart(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    text = "Summarise this: the quick brown fox jumps over the lazy dog."
    ids = []
    for _ in range(3):
        conv = store.new_conversation()
        store.add_message(conv.id, "user", text)
        ids.append(conv.id)
    titles = {c.id: c.title for c in store.conversations()}
    assert [titles[i] for i in ids] == [text, f"{text} (2)", f"{text} (3)"]
    store.set_title(ids[0], "Fox summary")
    assert store.conversation(ids[0]).title == "Fox summary"
    assert all(c.created > 0 for c in store.conversations())


def test_a_chat_keeps_its_own_settings(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation()
    store.set_settings(conv.id, {"temperature": 0.7, "seed": 42, "thinking": True})
    other = store.new_conversation()
    assert store.conversation(conv.id).settings == {"temperature": 0.7, "seed": 42, "thinking": True}
    assert store.conversation(other.id).settings == {}
    store._db.execute("UPDATE conversations SET settings = 'not json' WHERE id = ?", (other.id,))
    assert store.conversation(other.id).settings == {}
