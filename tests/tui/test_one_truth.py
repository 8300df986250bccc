"""One truth for a reply, whichever way it is asked: `-p` and the chat sample by one rule (asked, else the chat's,
else the user's defaults, else the model file's general.sampling.*, else the kind's); each reply keeps what it
was sampled with in the store, its receipt and its export; an empty reply stays in the transcript, called what
it is; a reasoning model's thoughts are kept apart from its answer by `-p` and the export."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from app.cli import main
from app.conversation.sampling import ChatSampling, reply_sampling, user_defaults
from app.conversation.templates import ChatFormat
from app.settings import Settings
from app.store import Conversation, StoredMessage
from app.store.export import to_json, to_markdown
from app.tui.screens.chat import ChatScreen
from app.tui.screens.receipt import receipts_markdown
from app.tui.widgets.message_view import MessageView
from tests.support.fake_engine import FakeEngine
from tests.support.thinking import write_thinking_model
from tests.support.tiny import ZOO, write_tiny_model
from tests.support.tui_helpers import make_app, model_loaded, reply_done, screen_text, send, wait_for

OWN = {  # what a model file's authors set (general.sampling.*)
    "general.sampling.temp": 0.6,
    "general.sampling.top_k": 20,
    "general.sampling.top_p": 0.8,
    "general.sampling.min_p": 0.1,
}


@pytest.fixture
def own_sampling(tmp_path: Path) -> Path:
    spec = ZOO["llama-f16"]
    return write_tiny_model(tmp_path / "own.gguf", dataclasses.replace(spec, extra_kv={**spec.extra_kv, **OWN}))


def test_the_rule_asked_then_chat_then_user_then_file_then_kind() -> None:
    chat_fmt = ChatFormat("chatml", "builtin")
    base = ChatFormat("transcript", "transcript")

    def pick(asked=None, chat=None, user=None, metadata=None, fmt=chat_fmt):
        none = ChatSampling()
        return reply_sampling(asked or none, chat or none, user or none, metadata or {}, fmt)

    assert pick().temperature == 0.2 and pick(fmt=base).temperature == 0.0  # the kind's
    assert pick(metadata=OWN).temperature == 0.6 and pick(metadata=OWN).top_k == 20  # the file's
    assert pick(user=user_defaults(0.9, None), metadata=OWN).temperature == 0.9  # the user's over the file's
    assert pick(chat=ChatSampling(temperature=0.3), user=user_defaults(0.9, None)).temperature == 0.3
    assert pick(asked=ChatSampling(temperature=1.1), chat=ChatSampling(temperature=0.3)).temperature == 1.1
    assert (
        pick(user=user_defaults(None, 64)).max_tokens == 64 and pick(asked=ChatSampling(max_tokens=8)).max_tokens == 8
    )


@pytest.mark.llama
async def test_p_and_the_chat_sample_a_model_that_sets_its_own_alike(
    own_sampling: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main([str(own_sampling), "-p", "Hello", "-n", "4", "--json"]) == 0
    by_p = json.loads(capsys.readouterr().out)["sampling"]
    assert (by_p["temperature"], by_p["top_k"], by_p["top_p"], by_p["min_p"]) == (0.6, 20, 0.8, 0.1)

    monkeypatch.setenv("VRAMCHAT_DEVICES", "ram=32GiB/8GiB")
    engine = FakeEngine(reply="Hi.")
    app = make_app(None, engine, model=str(own_sampling), settings=Settings(scan_known_caches=False, max_tokens=4))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, model_loaded(app))
        await send(app, pilot, "Hello")
        await wait_for(pilot, reply_done(app))
        chat = app.screen
        assert isinstance(chat, ChatScreen) and chat.conversation is not None
        reply = app.services.store.conversation(chat.conversation.id).messages[-1]
    assert reply.sampling == by_p  # kept with the reply: the chat sampled as -p did
    used = engine.params[-1]
    assert (used.temperature, used.top_k, used.top_p, used.min_p) == (0.6, 20, 0.8, 0.1)


async def test_each_reply_keeps_its_sampling_for_its_receipt_and_export(shelf: Path) -> None:
    engine = FakeEngine(reply="Paris.")
    app = make_app(shelf, engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: bool(app.screen.query("#models")))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        chat.controller.set_setting("temp", "0.9")  # as /temp 0.9 sets it
        await send(app, pilot, "What is the capital of France?")
        await wait_for(pilot, reply_done(app))
        chat.controller.set_setting("seed", "7")
        await send(app, pilot, "And of Italy?")
        await wait_for(pilot, reply_done(app))
        assert chat.conversation is not None
        conv = app.services.store.conversation(chat.conversation.id)
    first, second = [m.sampling for m in conv.messages if m.role == "assistant"]
    assert first is not None and first["temperature"] == 0.9 and first["seed"] == -1
    assert second is not None and second["seed"] == 7
    markdown = to_markdown(conv)
    assert "*Sampled with: temp 0.9 · top-p 0.95 · top-k 40 · min-p 0.05 · repeat 1.1 · seed random" in markdown
    assert "seed 7" in markdown
    assert to_json(conv)["messages"][1]["sampling"] == first
    receipt = receipts_markdown("chat", [{"plan": {}}], [first, second])
    assert "- Reply 1: temp 0.9" in receipt and "- Reply 2: temp 0.9" in receipt and "seed 7" in receipt


async def test_an_empty_reply_stays_in_the_transcript_called_what_it_is(shelf: Path) -> None:
    engine = FakeEngine(reply="")
    app = make_app(shelf, engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: bool(app.screen.query("#models")))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        await send(app, pilot, "Hello")
        await wait_for(pilot, reply_done(app))
        await pilot.pause(0.2)
        chat = app.screen
        assert isinstance(chat, ChatScreen) and chat.conversation is not None
        marker = "(no reply: the model ended its reply at once)"
        assert any(marker in row for row in screen_text(app))
        conv = app.services.store.conversation(chat.conversation.id)
        assert [m.role for m in conv.messages] == ["user", "assistant"] and conv.messages[1].content == ""
        await chat.redraw()  # the chat opened again: the marker is drawn from the store
        await pilot.pause(0.2)
        assert list(chat.query(MessageView))[-1].has_class("-empty")
        assert any(marker in row for row in screen_text(app))
    assert f"*{marker}*" in to_markdown(conv)


def test_the_export_keeps_a_replys_reasoning_apart_from_its_answer() -> None:
    reply = "[THINK]The user asks for 2 + 3. Adding: 5.[/THINK]2 + 3 = **5**."
    conv = Conversation(1, "sums", "/m.gguf", "Magistral", "", 0.0, 0.0)
    conv.messages = [StoredMessage(1, 1, "user", "2 + 3?"), StoredMessage(2, 1, "assistant", reply)]
    markdown = to_markdown(conv)
    assert "[THINK]" not in markdown and "<details><summary>Thought</summary>" in markdown
    assert markdown.index("Adding: 5.") < markdown.index("</details>") < markdown.index("2 + 3 = **5**.")
    message = to_json(conv)["messages"][1]
    assert message["answer"] == "2 + 3 = **5**." and message["reasoning"] == "The user asks for 2 + 3. Adding: 5."
    assert message["content"] == reply  # as the model wrote it


@pytest.mark.llama
def test_p_prints_the_answer_and_keeps_the_thoughts_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write_thinking_model(tmp_path / "thinker.gguf")  # its template opens <think>: all it writes is thought
    assert main([str(model), "-p", "Hello", "-n", "12"]) == 0
    plain = capsys.readouterr()
    assert plain.out.strip() == "" and "<think>" not in plain.out + plain.err  # no thoughts on stdout, none shown
    assert main([str(model), "-p", "Hello", "-n", "12", "--verbose"]) == 0
    verbose = capsys.readouterr()
    assert verbose.out.strip() == "" and "the model's reasoning" in verbose.err
    assert main([str(model), "-p", "Hello", "-n", "12", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["answer"] == "" and data["reasoning"]
