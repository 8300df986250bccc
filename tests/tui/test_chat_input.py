"""The message box as people use it: Up and Down through earlier messages, the new-line key its hint
names, slash commands with completion, and copying a message or a code block from the keyboard."""

from __future__ import annotations

from pathlib import Path

from textual import events
from textual.geometry import Size

from app.tui.screens.chat import ChatScreen
from app.tui.screens.dialogs import ConfirmDialog
from app.tui.screens.help import HelpScreen
from app.tui.widgets.chat.slash_commands import COMMANDS
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_view import MessageView
from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import (
    layout_problems,
    make_app,
    open_chat,
    reply_done,
    screen_text,
    send_and_wait,
    wait_for,
)

SIZE = (120, 40)
LONG = " ".join(["A question long enough to wrap over several rows of the message box."] * 3)


async def test_up_and_down_go_through_earlier_messages_and_keep_the_draft(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        await send_and_wait(app, pilot, "an earlier chat's question")
        await pilot.press("ctrl+n")
        await pilot.pause()
        await send_and_wait(app, pilot, "first line\nsecond line")
        await send_and_wait(app, pilot, LONG)
        await send_and_wait(app, pilot, "the last question")
        box = chat.query_one(ChatInput)
        box.focus()
        await pilot.press(*"my draft")
        await pilot.press("up")
        assert box.text == "the last question"
        await pilot.press("up")  # a message wrapped over rows: one Up each, all the same
        assert box.text == LONG and box.wrapped_document.height > 1
        await pilot.press("up")  # a message of two lines: the cursor at its top, so Up goes on
        assert box.text == "first line\nsecond line"
        await pilot.press("up")  # then the earlier chat's
        assert box.text == "an earlier chat's question"
        await pilot.press("up")  # nothing earlier: it stays
        assert box.text == "an earlier chat's question"
        await pilot.press("down", "down", "down")
        assert box.text == "the last question"
        await pilot.press("down")  # after the newest, the draft as it was typed
        assert box.text == "my draft"
        # Up inside a message of several lines moves the cursor, not through the history
        box.load_text("one\ntwo")
        box.move_cursor((1, 1))
        await pilot.press("up")
        assert box.text == "one\ntwo" and box.cursor_location == (0, 1)
        # a recalled message edited is a new draft: Down no longer replaces it
        box.load_text("")
        await pilot.press("up", "end", *"!", "down")
        assert box.text == "the last question!"


async def test_the_hint_names_the_new_line_key_that_works_in_tmux(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        chat = await open_chat(app, pilot)
        box = chat.query_one(ChatInput)
        assert "Ctrl+J new line" in box.placeholder and "Shift+Enter" not in box.placeholder
        assert any("Ctrl+J new line" in row for row in screen_text(app))
        box.focus()
        await pilot.press(*"a", "ctrl+j", *"b")
        assert box.text == "a\nb"
        assert not list(chat.query(MessageView))  # nothing sent


async def test_slash_commands_complete_run_and_are_not_sent(shelf: Path) -> None:
    engine = FakeEngine()
    app = make_app(shelf, engine)
    async with app.run_test(size=(80, 24)) as pilot:
        chat = await open_chat(app, pilot)
        await send_and_wait(app, pilot, "What is the capital of France?")
        box = chat.query_one(ChatInput)
        box.focus()
        await pilot.press("/")  # every command, in a list that scrolls: the screen stays whole at 80x24
        menu = box.menu
        assert menu.shown and menu.option_count == len(COMMANDS)
        assert layout_problems(app) == [], "\n".join(screen_text(app))
        await pilot.press("t")
        assert menu.shown and [o.id for o in menu.options] == ["temp"]
        assert any("/temp" in row and "temperature" in row for row in screen_text(app))
        await pilot.press("tab")  # completes, with room for the value
        assert box.text == "/temp " and not menu.shown
        await pilot.press(*"0.7", "enter")
        await pilot.pause()
        assert box.text == "" and len(engine.prompts) == 1  # run, not sent to the model
        await send_and_wait(app, pilot, "And of Germany?")
        assert engine.params[-1].temperature == 0.7
        # this chat's own: kept with it, not with every chat
        assert app.store.conversation(chat.conversation.id).settings.get("temperature") == 0.7
        assert app.services.settings.temperature != 0.7

        await pilot.press("/", "r", "e")
        assert [o.id for o in menu.options] == ["retry", "receipt", "reload"]
        await pilot.press("enter")  # the first one chosen: /retry runs at once
        await pilot.pause(0.05)
        await wait_for(pilot, reply_done(app))
        assert len(engine.prompts) == 3 and box.text == ""

        await pilot.press("/", "s", "y", "s", "tab", *"Answer in French.", "enter")
        await pilot.pause()
        assert app.store.conversation(chat.conversation.id).system_prompt == "Answer in French."  # type: ignore[union-attr]

        # Esc closes the list and leaves the text
        await pilot.press("/", "h", "escape")
        assert not menu.shown and box.text == "/h"
        box.load_text("/help")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and "/temp" in app.screen.text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)


async def test_an_unknown_slash_word_is_asked_about_before_it_is_sent(shelf: Path) -> None:
    engine = FakeEngine()
    app = make_app(shelf, engine)
    async with app.run_test(size=(80, 24)) as pilot:
        chat = await open_chat(app, pilot)
        box = chat.query_one(ChatInput)
        box.focus()
        box.load_text("/foo bar")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog) and "/foo is not a command" in app.screen.title_text
        await pilot.press("escape")  # Esc: back to the box, the text kept to edit
        await pilot.pause()
        assert app.screen is chat and box.text == "/foo bar" and not engine.prompts
        await pilot.press("enter", "enter")  # asked again; Enter sends it
        await pilot.pause(0.05)
        await wait_for(pilot, reply_done(app))
        assert len(engine.prompts) == 1
        assert next(v.text for v in chat.query(MessageView)) == "/foo bar"


CODE_REPLY = (
    "Here is the code:\n\n```python\nprint('hi')\nprint('there')\n```\n\nAnd to list the files:\n\n```\nls -l\n```"
)


async def test_a_message_or_a_code_block_alone_is_copied_from_the_keyboard(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine(reply=CODE_REPLY))
    async with app.run_test(size=(80, 24)) as pilot:
        chat = await open_chat(app, pilot)
        await send_and_wait(app, pilot, "Show me some code")
        await pilot.press("ctrl+up")  # the focus on the messages: the last one marked
        await pilot.pause()
        assert app.focused is chat.messages
        assert chat.messages.selected_message is not None and chat.messages.selected_message.role == "assistant"
        await pilot.press("c")
        assert app.clipboard == CODE_REPLY
        await pilot.press("down", "c")  # the reply's first code block, alone
        assert app.clipboard == "print('hi')\nprint('there')"
        assert notices(app)[-1] == "Copied the python block, 2 lines"
        await pilot.press("down", "enter")
        assert app.clipboard == "ls -l" and notices(app)[-1] == "Copied the code block, 1 line"
        await pilot.press("down", "c")  # the last stop: it stays there
        assert app.clipboard == "ls -l"
        await pilot.press("up", "up", "up", "c")  # up past the reply to the question
        assert app.clipboard == "Show me some code" and notices(app)[-1] == "Copied your message, 1 line"
        assert any("Copy" in row for row in screen_text(app)[-2:])  # the footer names the key
        await pilot.press("escape")  # back to typing; Esc did not stop anything
        await pilot.pause()
        assert app.focused is chat.query_one(ChatInput)
        assert not chat.query(".-selected")
        # Ctrl+O still copies the last reply whole, as written (a block alone is the list's)
        await pilot.press("ctrl+o")
        assert app.clipboard == CODE_REPLY and notices(app)[-1] == "Copied the reply, 12 lines"
        # /select does what Ctrl+Up does
        box = chat.query_one(ChatInput)
        box.load_text("/select")
        await pilot.press("enter")
        await pilot.pause()
        assert app.focused is chat.messages


def notices(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_the_new_keys_are_in_f1_and_the_palette(shelf: Path) -> None:
    from app.tui.screens.help import HELP

    assert "`Ctrl+↑`" in HELP and "`/temp [VALUE]`" in HELP and "`Ctrl+J`" in HELP
    app = make_app(shelf, FakeEngine(reply=CODE_REPLY))
    async with app.run_test(size=(80, 24)) as pilot:
        chat = await open_chat(app, pilot)
        await send_and_wait(app, pilot, "Show me some code")
        titles = [c.title for c in app.get_system_commands(chat)]
        assert "Select a message or code block" in titles and "Slash commands" in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"select a message", "enter")
        await wait_for(pilot, lambda: app.focused is chat.messages)
        await pilot.press("down", "c")
        assert app.clipboard == "print('hi')\nprint('there')"


def test_the_box_fits_its_hint_before_anything_is_typed() -> None:
    """A box resized before its first change (the chat screen in an 80x24 tmux, on loading a model)
    chooses its hint: it once crashed there, asked whether the model sees pictures before that was set."""
    box = ChatInput()
    box.on_resize(events.Resize(Size(20, 3), Size(20, 3)))
    assert box.placeholder == "Ask something…"  # unmounted: no room for more
