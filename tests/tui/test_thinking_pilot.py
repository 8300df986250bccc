"""A reasoning model's reply in the chat: its thoughts folded above the answer, "Thinking… N s" while it
thinks, "Thought for N s, M tokens" after; Enter on the fold or a click unfolds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Markdown
from textual.widgets._collapsible import CollapsibleTitle

from app.conversation.reasoning import split_reply
from app.settings import Settings
from app.tui.widgets.chat.thought import ThoughtFold
from app.tui.widgets.message_view import MessageView
from tests.support.fake_engine import FakeEngine
from tests.support.thinking import RECORDED, write_thinking_model
from tests.support.tui_helpers import make_app, model_loaded, reply_done, screen_text, send, wait_for


def _screen(app) -> str:
    return "\n".join(screen_text(app))


@pytest.mark.llama
async def test_a_thinking_models_reply_shows_folded_with_its_time(tmp_path: Path) -> None:
    path = write_thinking_model(tmp_path / "tiny-thinking-instruct.gguf")
    settings = Settings(scan_known_caches=False, temperature=0.0, max_tokens=12)
    app = make_app(None, model=str(path), settings=settings, real_engine=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=60)
        await send(app, pilot, "What is 7 times 8?")
        await wait_for(pilot, reply_done(app), timeout=60)
        await pilot.pause(0.1)
        view = list(app.screen.query(MessageView))[-1]
        fold = view.query_one(ThoughtFold)
        thought_words = set(split_reply(view.text).reasoning.split())
        assert thought_words
        assert fold.collapsed and fold.title.startswith("Thought for ") and fold.title.endswith(" s, 12 tokens")
        folded = _screen(app)
        assert f"▶ {fold.title}" in folded
        fold.query_one(CollapsibleTitle).focus()
        await pilot.press("enter")  # unfolds
        await pilot.pause(0.1)
        # the thoughts' words come on screen only now (a word may also be elsewhere, "What" in the question)
        shown_now = set(_screen(app).split()) - set(folded.split())
        assert not fold.collapsed and shown_now & thought_words
        await pilot.click(CollapsibleTitle)  # and a click folds it again
        await pilot.pause(0.1)
        assert fold.collapsed

        # the chat read back from the store: folded again, its time from the reply's own speed
        chat = app.screen
        await chat.open_conversation(chat.conversation.id)
        await pilot.pause(0.1)
        fold = list(chat.query(MessageView))[-1].query_one(ThoughtFold)
        assert fold.collapsed and fold.title.startswith("Thought for about ") and fold.title.endswith(" 12 tokens")


async def test_while_it_thinks_the_fold_counts_and_the_answer_shows_below(zoo: dict[str, Path]) -> None:
    _, raw, _, answer = RECORDED[0]  # Qwen3, which opens the block itself
    engine = FakeEngine(reply=raw, delay=0.15)
    app = make_app(None, engine=engine, model=str(zoo["qwen3-hd"]))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, model_loaded(app))
        await send(app, pilot, "What is the capital of France?")
        await wait_for(pilot, lambda: bool(list(app.screen.query(ThoughtFold))))
        fold = app.screen.query_one(ThoughtFold)
        assert fold.title.startswith("Thinking… ")
        await wait_for(pilot, lambda: "▶ Thinking… 1 s" in _screen(app), timeout=5)  # counts the seconds
        await wait_for(pilot, reply_done(app), timeout=20)
        await pilot.pause(0.1)
        view = list(app.screen.query(MessageView))[-1]
        assert fold.title.startswith("Thought for ") and fold.collapsed
        body = view.query_one(".message-body", Markdown)
        assert body.source == answer and "overthink" not in _screen(app)
        assert "Paris" in _screen(app)


async def test_f9_turns_thinking_off_for_this_chat_only_and_the_chat_keeps_it(tmp_path: Path) -> None:
    path = write_thinking_model(tmp_path / "tiny-thinking-instruct.gguf")  # its template reads enable_thinking
    app = make_app(None, engine=FakeEngine(reply="56."), model=str(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, model_loaded(app))
        chat = app.screen
        await pilot.press("f9")  # before the chat's first message: it goes with the chat that message starts
        await send(app, pilot, "What is 7 times 8?")
        await wait_for(pilot, reply_done(app))
        assert chat.conversation is not None and not chat.controller.thinking
        kept = app.store.conversation(chat.conversation.id)
        assert kept.settings.get("thinking") is False  # in the store: a restart keeps it
        first = chat.conversation.id
        await pilot.press("ctrl+n")
        await pilot.pause(0.1)
        assert chat.controller.thinking  # a new chat thinks again
        await chat.open_conversation(first)
        await pilot.pause(0.1)
        assert not chat.controller.thinking
