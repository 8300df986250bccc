"""What a new user meets in the first hour, each as they would meet it (issue 24's eight points that
are not about the layout; tests/tui/test_layout_sizes.py covers those)."""

from __future__ import annotations

import queue
from pathlib import Path

from textual.containers import VerticalScroll

from app.engine.types import PromptProgress
from app.settings import Settings
from app.tui.screens.chat import ChatScreen
from app.tui.screens.help import HelpScreen
from app.tui.screens.picker import PickerScreen
from app.tui.widgets.message_view import MessageView
from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, reply_done, screen_text, send, wait_for

SIZE = (120, 40)


def notices(app) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def loaded_chat(app, pilot) -> ChatScreen:
    await wait_for(pilot, picker_ready(app))
    await pilot.press("ctrl+l")
    await wait_for(pilot, model_loaded(app))
    assert isinstance(app.screen, ChatScreen)
    return app.screen


def status(chat: ChatScreen) -> str:
    return str(chat.query_one("#context-line").render())


async def test_an_engine_killed_while_idle_is_noticed_within_a_second(shelf: Path) -> None:
    engine = FakeEngine(reply="Paris.")
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        chat = await loaded_chat(app, pilot)
        engine.die()  # kill -9 of the engine process between replies
        await pilot.pause(1.5)
        assert "not loaded: the engine stopped" in str(chat.sub_title)
        assert "the engine stopped" in status(chat) and "F5 reloads" in status(chat)
        # nothing points to a cure (a kill, no memory words): the user is asked whether to reload
        assert "The engine stopped" in "\n".join(screen_text(app)) and "Reload" in "\n".join(screen_text(app))
        await pilot.press("enter")  # the dialog's Reload
        await wait_for(pilot, model_loaded(app))
        assert len(engine.loads) == 2 and engine.loaded


async def test_an_empty_reply_is_called_what_it_is(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine(reply=""))
    async with app.run_test(size=SIZE) as pilot:
        await loaded_chat(app, pilot)
        await send(app, pilot, "x" * 500)
        await wait_for(pilot, reply_done(app))
        await pilot.pause(0.1)
        said = "\n".join(notices(app))
        assert "ended its reply at once" in said and "549 tokens" in said  # the question in the transcript
        assert "Stopped before the model wrote anything" not in said  # nobody pressed Esc


async def test_the_context_counter_follows_the_chat(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine(reply="Paris is the capital."))
    async with app.run_test(size=SIZE) as pilot:
        chat = await loaded_chat(app, pilot)
        await send(app, pilot, "What is the capital of France?")
        await wait_for(pilot, reply_done(app))
        await wait_for(pilot, lambda: chat.context_tokens > 30)
        used = chat.context_tokens
        assert f"context {used:,} /" in status(chat)
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: "context 0 /" in status(chat))
        await chat.open_conversation(app.store.conversations(5)[0].id)  # the chat just held, from the list
        await wait_for(pilot, lambda: chat.context_tokens > 0)
        assert chat.context_tokens >= used - 30  # the conversation as it stands (the reply counted too)


async def test_a_long_prompt_shows_its_reading_progress(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine(reply="Done.", prefill_seconds=2.0))
    async with app.run_test(size=SIZE) as pilot:
        chat = await loaded_chat(app, pilot)
        await send(app, pilot, "y" * 2000)
        seen: list[str] = []
        for _ in range(40):
            await pilot.pause(0.05)
            if chat.reply.view is not None and chat.reply.view.note.startswith("reading the prompt"):
                seen.append(chat.reply.view.note)
        await wait_for(pilot, reply_done(app))
        assert seen and " of 2," in seen[-1] and "tok/s" in seen[-1]


class TellingEngine(FakeEngine):
    """Reads a prompt by saying what the test hands it, one word at a time, and nothing else: its
    last_stats never move while it reads, so what the chat shows comes from what it says."""

    def __init__(self) -> None:
        super().__init__(reply="Done.")
        self.say: queue.Queue[PromptProgress | None] = queue.Queue()

    def generate(self, prompt, params=None, progress=None):
        while (word := self.say.get(timeout=20)) is not None:
            assert progress is not None
            progress(word)
        yield from super().generate(prompt, params, progress)


async def test_the_prompt_progress_shown_follows_the_engines_words(shelf: Path) -> None:
    engine = TellingEngine()
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        chat = await loaded_chat(app, pilot)
        await send(app, pilot, "What is in this picture?")

        def note() -> str:
            return chat.reply.view.note if chat.reply.view is not None else ""

        assert note() == "…"
        said = [
            (PromptProgress(picture=(0, 2)), "showing the model the picture 1 of 2…"),
            (PromptProgress(picture=(1, 2)), "showing the model the picture 2 of 2…"),
            (PromptProgress(0, 3000), "reading the prompt: 0 of 3,000 tokens"),
            (PromptProgress(1024, 3000, 512.4), "reading the prompt: 1,024 of 3,000 tokens · 512 tok/s"),
            (PromptProgress(100, 200, 50.0), "reading the prompt: 1,024 of 3,000 tokens · 512 tok/s"),  # too short
        ]
        for word, shown in said:
            engine.say.put(word)
            await wait_for(pilot, lambda shown=shown: note() == shown)
            await pilot.pause(0.3)  # longer than the poll this replaced: nothing else changes it
            assert note() == shown
        engine.say.put(None)
        await wait_for(pilot, reply_done(app))
        assert chat.query(MessageView).last().text == "Done."


async def test_keys_pressed_before_the_list_is_drawn_are_not_lost(shelf: Path) -> None:
    engine = FakeEngine(reply="Paris.")
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")  # at once, before the models are listed and planned
        await wait_for(pilot, model_loaded(app))
        assert len(engine.loads) == 1


async def test_help_scrolls_with_the_keyboard_and_names_every_key(shelf: Path) -> None:
    app = make_app(shelf)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("f1")
        await pilot.pause(0.2)
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box", VerticalScroll)
        assert app.screen.focused is box
        await pilot.press("pagedown", "pagedown", "end")
        await pilot.pause(0.2)
        assert box.scroll_y > 0 and box.scroll_y == box.max_scroll_y
        assert "Esc" in "\n".join(screen_text(app))  # its last line, "Press Esc to close this help"
        from app.tui.screens.help import HELP

        assert "`F6`" in HELP and "RPC servers" in HELP
        await pilot.press("escape")
        await pilot.pause(0.1)
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert "RPC servers" in commands  # the palette has every action


async def test_the_install_hint_reads_as_written(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    app = make_app(empty, settings=Settings(scan_known_caches=False))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen) and not app.screen._scanning)
        await pilot.pause(0.2)
        shown = str(app.screen.query_one("#plan-text").render())  # as drawn: [demo] is no markup tag
        assert "pip install 'vramchat[demo]'" in shown, shown


async def test_a_screenshot_is_saved_where_it_can_be_and_the_path_said(shelf: Path, _private_home: Path) -> None:
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        app.action_screenshot()
        await pilot.pause(0.2)
        saved = list(_private_home.rglob("*.svg"))
        assert len(saved) == 1, "no Downloads folder in this home: vramchat's own folder instead"
        assert any(str(saved[0]) in n for n in notices(app))


async def test_the_palettes_screenshot_is_saved_where_it_can_be_too(shelf: Path, _private_home: Path) -> None:
    """Textual's own palette command saved to a Downloads folder alone: without one it said only that it failed."""
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        [command] = [c for c in app.get_system_commands(app.screen) if c.title == "Screenshot"]
        command.callback()
        await pilot.pause(0.2)
        saved = list(_private_home.rglob("*.svg"))
        assert len(saved) == 1 and any(str(saved[0]) in n for n in notices(app)), notices(app)


async def test_a_context_past_the_trained_length_is_planned_with_a_warning(shelf: Path) -> None:
    app = make_app(shelf)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        screen.query_one("#ctx").value = "200000"
        await wait_for(pilot, lambda: screen.result is not None and screen.result.plan.resolved.n_ctx >= 200000)
        await pilot.pause(0.2)
        text = " ".join(" ".join(screen_text(app)).split())
        assert "the model was trained for" in text and "--rope-scaling yarn" in text, "\n".join(screen_text(app))
