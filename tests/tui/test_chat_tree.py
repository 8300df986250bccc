"""Edit and branch in the chat screen, from the keyboard: an earlier message edited and sent again is a
branch (the first still reachable), a retry keeps the earlier reply as an alternative ("‹ 1/2 ›")."""

from __future__ import annotations

from pathlib import Path

from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_view import MessageView
from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, reply_done, send_and_wait, wait_for

SIZE = (120, 40)


def _shown(chat) -> list[str]:
    return [v.text for v in chat.query(MessageView)]


async def test_an_earlier_message_edited_is_a_branch_and_a_retry_keeps_the_earlier_reply(shelf: Path) -> None:
    engine = FakeEngine(reply="first")
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        chat = app.screen
        for word in ("one", "two", "three"):
            await send_and_wait(app, pilot, word)
        assert _shown(chat) == ["one", "first", "two", "first", "three", "first"]

        # the keyboard's way to an earlier message: Alt+Up focuses the last, Up goes back
        await pilot.press("alt+up", "up", "up", "up")
        marked = chat.messages.focused_message
        assert marked is not None and marked.text == "two" and marked.role == "user"
        await pilot.press("e")
        box = chat.query_one(ChatInput)
        assert box.text == "two" and box.has_focus and chat.controller.editing is not None
        engine.reply = "edited"
        box.load_text("two, edited")
        await pilot.press("enter")
        await pilot.pause(0.05)
        await wait_for(pilot, reply_done(app))
        await pilot.pause(0.05)
        assert _shown(chat) == ["one", "first", "two, edited", "edited"]
        edited = list(chat.query(MessageView))[2]
        assert edited.place == (2, 2) and "‹ 2/2 ›" in str(edited._header())
        # the prompt held the branch alone: the later turns of the first branch are not in it
        prompt = "".join(chr(t) for t in engine.prompts[-1])  # the fake engine: a token per character
        assert "two, edited" in prompt and "three" not in prompt

        # back to the first branch, whole: Alt+Up marks the last message, Up the edited one
        await pilot.press("alt+up", "up")
        assert chat.messages.focused_message is edited
        await pilot.press("left")
        await pilot.pause(0.05)
        assert _shown(chat) == ["one", "first", "two", "first", "three", "first"]
        marked = chat.messages.focused_message
        assert marked is not None and marked.text == "two" and marked.place == (1, 2)
        await pilot.press("escape")
        assert box.has_focus

        # a retry keeps the earlier reply: "‹ 2/2 ›", Alt+Left steps back to it
        engine.reply = "second"
        await pilot.press("ctrl+r")
        await pilot.pause(0.05)
        await wait_for(pilot, reply_done(app))
        await pilot.pause(0.05)
        last = list(chat.query(MessageView))[-1]
        assert (last.text, last.place) == ("second", (2, 2))
        await pilot.press("alt+left")
        await pilot.pause(0.05)
        last = list(chat.query(MessageView))[-1]
        assert (last.text, last.place) == ("first", (1, 2))
        conv = app.store.conversation(chat.conversation.id)
        assert [m.content for m in conv.messages][-2:] == ["three", "first"]

        # Ctrl+E on a reply edits the message it answers; Esc drops the edit, nothing is sent
        assert app.focused is box  # Alt+Left from the message box leaves the focus there
        await pilot.press("alt+up")  # the last reply marked
        await pilot.press("ctrl+e")
        assert box.text == "three"
        await pilot.press("escape")
        assert box.text == "" and chat.controller.editing is None


async def test_a_chat_is_renamed_deleted_and_brought_back_and_the_list_has_dates(shelf: Path) -> None:
    from textual.widgets import Input, OptionList

    from app.tui.screens.rename import RenameDialog

    engine = FakeEngine(reply="ok")
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        chat = app.screen
        await send_and_wait(app, pilot, "Summarise: the fox")
        await pilot.press("ctrl+n")
        await pilot.pause()
        await send_and_wait(app, pilot, "Summarise: the fox")
        titles = [c.title for c in app.store.conversations()]
        assert titles == ["Summarise: the fox (2)", "Summarise: the fox"]
        listed = chat.past_chats.options
        label = str(listed.get_option_at_index(0).prompt)
        assert label.startswith("Summarise: the fox (2)") and ":" in label.split("\n")[1]  # today: the time

        # F6 with an empty message box renames the open chat; with text in the box F6 is the box's
        box = chat.query_one(ChatInput)
        box.focus()
        box.load_text("draft")
        await pilot.press("f6")
        assert not isinstance(app.screen, RenameDialog)
        box.clear()
        await pilot.press("f6")
        await pilot.pause()
        assert isinstance(app.screen, RenameDialog)
        app.screen.query_one(Input).value = "Fox, second try"
        await pilot.press("enter")
        await pilot.pause()
        assert app.store.conversation(chat.conversation.id).title == "Fox, second try"

        # Delete in the list deletes the highlighted chat (the open one here); Ctrl+Z brings it back
        open_id = chat.conversation.id
        listed.focus()
        listed.highlighted = 0
        await pilot.press("delete")
        await pilot.pause()
        assert chat.conversation is None and [c.id for c in app.store.conversations()] != []
        assert open_id not in [c.id for c in app.store.conversations()]
        assert any("Ctrl+Z" in str(n.message) for n in app._notifications)
        box.focus()
        await pilot.press("ctrl+z")
        await pilot.pause(0.05)
        assert open_id in [c.id for c in app.store.conversations()]
        assert chat.conversation is not None and chat.conversation.id == open_id
        assert isinstance(listed, OptionList)


def test_the_list_dates_read_as_a_person_says_them() -> None:
    import time

    from app.tui.widgets.chat.past_chats import when

    now = time.mktime((2026, 11, 27, 15, 0, 0, 0, 0, -1))
    assert when(now - 3600, now) == "14:00"
    assert when(now - 86400, now) == "yesterday"
    assert when(now - 10 * 86400, now) == "Nov 17"
    assert when(now - 400 * 86400, now) == "2025-10-23"
