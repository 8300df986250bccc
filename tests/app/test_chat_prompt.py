"""From a conversation to a prompt: formats, dropping the oldest turns, saving a streaming reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.conversation.prompt import ChatError, build_prompt, to_messages
from app.conversation.reply import ReplySink
from app.conversation.templates import ChatFormat, ChatMessage, choose_format
from app.store import Store, StoredMessage

TRANSCRIPT = choose_format({}, "gemma3", "gemma-3-270m-q4_k_m.gguf")


def chars(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_base_model_gets_a_transcript() -> None:
    build = build_prompt(TRANSCRIPT, "", [ChatMessage("user", "What is the capital of France?")], 4096, 64, chars)
    # one worked exchange first: it shows a base model what the transcript is for (short answers)
    assert build.text == "Q: What is the capital of Japan?\nA: Tokyo.\nQ: What is the capital of France?\nA:"
    assert build.dropped == 0 and build.tokens == chars(build.text)


def test_gguf_template_is_rendered_without_a_second_bos() -> None:
    fmt = ChatFormat(
        "gguf",
        "jinja",
        "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}"
        "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
    )
    build = build_prompt(fmt, "Be brief.", [ChatMessage("user", "Hi")], 4096, 64, chars)
    assert build.text == "<system>Be brief.<user>Hi<assistant>"


def test_oldest_turns_are_dropped_and_the_system_prompt_kept() -> None:
    turns = []
    for i in range(10):
        turns += [ChatMessage("user", f"question {i} " + "x" * 35), ChatMessage("assistant", f"answer {i} " + "y" * 35)]
    turns.append(ChatMessage("user", "last question"))
    build = build_prompt(TRANSCRIPT, "SYSTEM", turns, 512, 128, chars)
    assert build.text.startswith("SYSTEM\nQ: What is the capital of Japan?\nA: Tokyo.\nQ: question ")
    assert build.text.endswith("Q: last question\nA:")
    assert build.dropped > 0 and build.dropped % 2 == 0  # whole turns
    assert len(build.tokens) <= 512 - 128
    assert build.near_limit
    kept = build_prompt(TRANSCRIPT, "SYSTEM", turns, 100_000, 128, chars)
    assert kept.dropped == 0 and not kept.near_limit


def test_a_message_longer_than_the_context_is_a_clear_error() -> None:
    with pytest.raises(ChatError, match="context of 512 tokens cannot hold it"):
        build_prompt(TRANSCRIPT, "", [ChatMessage("user", "x" * 1000)], 512, 64, chars)
    with pytest.raises(ChatError, match="no question"):
        build_prompt(TRANSCRIPT, "", [], 512, 64, chars)


def test_empty_replies_are_left_out() -> None:
    stored = [
        StoredMessage(1, 1, "user", "Hi"),
        StoredMessage(2, 1, "assistant", "", "partial"),
        StoredMessage(3, 1, "user", "Again"),
        StoredMessage(4, 1, "assistant", "Half a", "partial"),
    ]
    assert to_messages(stored) == [
        ChatMessage("user", "Hi"),
        ChatMessage("user", "Again"),
        ChatMessage("assistant", "Half a"),
    ]


def test_reply_sink_saves_while_streaming(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite3")
    conv = store.new_conversation()
    store.add_message(conv.id, "user", "Count")
    msg = store.begin_reply(conv.id)
    sink = ReplySink(store, msg, interval=0.0)
    sink.add(" one")
    assert store.message(msg).content == " one"  # type: ignore[union-attr]
    assert store.message(msg).state == "streaming"  # type: ignore[union-attr]
    sink.add(" two")
    assert sink.finish("user") == "one two"
    saved = store.message(msg)
    assert saved is not None and (saved.content, saved.state) == ("one two", "partial")
