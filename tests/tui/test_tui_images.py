"""Pictures in the app: attached (/image, a paste or a dropped file, the file dialog), sent, answered,
kept with the chat by content and found again when it is reopened; the picker's Vision setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual import events

from app.attachments import MediaStore, media_dir
from app.settings import Settings
from app.tui.screens.chat import ChatScreen
from app.tui.screens.picker import PickerScreen
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.picture import Picture
from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, reply_done, send, wait_for
from tests.support.vision import write_picture, write_vision_pair


def _pending(app) -> list[str]:
    return [a.name for a in app.screen.pending]


def _stored_files() -> list[Path]:
    return [p for p in media_dir().rglob("*") if p.is_file()]


@pytest.mark.llama
async def test_a_picture_sent_answered_and_found_again_when_the_chat_is_reopened(tmp_path: Path) -> None:
    """The real engine and libmtmd with the tiny Gemma 3 pair: /image attaches, Enter sends the picture
    with the question, the model answers, and the reopened chat shows the picture again."""
    models = tmp_path / "models"
    model, _ = write_vision_pair(models, "gemma3")
    picture = write_picture(tmp_path / "my picture.png", 120, 90)
    settings = Settings(scan_known_caches=False, temperature=0.0, max_tokens=8)
    app = make_app(models, model=str(model), settings=settings, real_engine=True)
    async with app.run_test(size=(150, 45)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=90)
        chat = app.screen
        assert isinstance(chat, ChatScreen) and app.session.model is not None and app.session.model.sees
        await send(app, pilot, f"/image '{picture}'")
        await wait_for(pilot, lambda: _pending(app) == ["my picture.png"])
        assert "my picture.png" in str(chat.query_one("#attachments").render())
        await send(app, pilot, "What is in this picture?")
        await wait_for(pilot, reply_done(app), timeout=90)
        await pilot.pause(0.1)
        user, reply = list(chat.query(MessageView))[-2:]
        assert user.role == "user" and [p.attachment.name for p in user.query(Picture)] == ["my picture.png"]
        assert reply.role == "assistant" and reply.text
        assert not _pending(app) and not chat.query_one("#attachments").display
        encoded = app.session.engine.encoded  # type: ignore[attr-defined]
        assert len(encoded) == 1 and encoded[0].tokens == 16
        # the projector's buffers, exact once the picture went through them: as planned
        m, plan = app.session.model.report.measurements, app.session.model.plan
        planned = {b.kind: b.bytes for b in plan.buffers if b.kind.startswith("projector")}
        assert m.projector_weights["CPU"] == planned["projector_weights"]
        assert m.projector_compute["CPU"] == planned["projector_compute"]

        conv_id = chat.conversation.id  # type: ignore[union-attr]
        stored = app.store.conversation(conv_id).messages[0]
        assert stored.content == "What is in this picture?" and [a.name for a in stored.attachments] == [
            "my picture.png"
        ]
        await chat.action_new_chat()
        await pilot.pause(0.1)
        assert not list(chat.query(Picture))
        await chat.open_conversation(conv_id)
        await pilot.pause(0.2)
        (found,) = list(chat.query(Picture))
        assert found.attachment == stored.attachments[0]
        assert found.path is not None and found.path.read_bytes() == picture.read_bytes()
        assert found.attachment.describe() in str(found.query_one(".picture-caption").render())


async def test_a_dropped_file_a_pasted_path_and_a_picture_sent_twice_kept_once(tmp_path: Path) -> None:
    models = tmp_path / "models"
    model, _ = write_vision_pair(models, "gemma3")
    picture = write_picture(tmp_path / "cat photo.jpg", 64, 48)
    copy = tmp_path / "elsewhere" / "same.jpg"
    copy.parent.mkdir()
    copy.write_bytes(picture.read_bytes())
    engine = FakeEngine(reply="A striped picture.")
    app = make_app(models, engine=engine, model=str(model))
    async with app.run_test(size=(150, 45)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=30)
        chat = app.screen
        box = chat.query_one(ChatInput)
        box.focus()
        # a terminal pastes a dropped file's path, quoted, or as a file:// URL
        app.post_message(events.Paste(f"'{picture}'"))
        await wait_for(pilot, lambda: _pending(app) == ["cat photo.jpg"])
        assert box.text == ""
        app.post_message(events.Paste(copy.as_uri()))
        await pilot.pause(0.3)
        assert _pending(app) == ["cat photo.jpg"]  # the same picture, attached once
        app.post_message(events.Paste("some words, not a file"))
        await pilot.pause(0.1)
        assert box.text == "some words, not a file"
        box.clear()
        await send(app, pilot, "Describe it.")
        await wait_for(pilot, reply_done(app))
        (prompt,) = engine.media_prompts
        assert len(prompt.media) == 1 and prompt.text.count(app.session.model.marker) == 1  # type: ignore[union-attr]
        assert prompt.media[0].width * prompt.media[0].height <= 64 * 64  # scaled to the plan's largest image
        assert len(_stored_files()) == 1  # kept once, by content
        # the same picture from the other path, with the next question: still one file
        await send(app, pilot, f"/image {copy}")
        await wait_for(pilot, lambda: _pending(app) == ["same.jpg"])
        await send(app, pilot, "And this one?")
        await wait_for(pilot, reply_done(app))
        assert len(_stored_files()) == 1
        ids = [a.id for m in app.store.conversation(chat.conversation.id).messages for a in m.attachments]  # type: ignore[union-attr]
        assert len(ids) == 2 and ids[0] == ids[1]
        # the second prompt shows both pictures (the conversation's), each with its own marker
        assert engine.media_prompts[-1].text.count(app.session.model.marker) == 2  # type: ignore[union-attr]
        # an export links the pictures, copied beside it
        from app.store.export import export_folder

        await pilot.press("ctrl+s")
        await pilot.pause(0.2)
        (md,) = export_folder().glob("*.md")
        text = md.read_text()
        link = f"{md.stem}-media/{ids[0][:16]}.jpg"
        assert text.count(f"![cat photo.jpg]({link})") == 1 and f"![same.jpg]({link})" in text
        assert (md.parent / link).read_bytes() == picture.read_bytes()


async def test_bad_files_are_refused_in_words_and_the_chat_goes_on(tmp_path: Path) -> None:
    models = tmp_path / "models"
    model, _ = write_vision_pair(models, "gemma3")
    notes = tmp_path / "notes.png"
    notes.write_text("not a picture")
    app = make_app(models, engine=FakeEngine(), model=str(model))
    async with app.run_test(size=(150, 45)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=30)
        await send(app, pilot, f"/image {notes}")
        await pilot.pause(0.3)
        await send(app, pilot, f"/image {tmp_path / 'missing.png'}")
        await pilot.pause(0.3)
        said = [n.message for n in app._notifications]
        assert any("notes.png: not an image vramchat can read" in m for m in said)
        assert any("missing.png: no such file" in m for m in said)
        assert not _pending(app)
        await send(app, pilot, "Still there?")
        await wait_for(pilot, reply_done(app))
        assert list(app.screen.query(MessageView))[-1].text


async def test_the_picker_plans_the_projector_and_vision_off_loads_the_model_alone(tmp_path: Path) -> None:
    models = tmp_path / "models"
    _model, mmproj = write_vision_pair(models, "gemma3")
    engine = FakeEngine()
    app = make_app(models, engine=engine)
    async with app.run_test(size=(150, 45)) as pilot:
        await wait_for(pilot, picker_ready(app))
        picker = app.screen
        assert isinstance(picker, PickerScreen)
        name = str(picker.query_one("#models").get_row_at(0)[0])  # type: ignore[attr-defined]
        assert "vision" in name and len(picker.entries) == 1  # listed once, with its mark
        assert picker.query_one("#vision").display and picker.query_one("#vision").value == "on"  # type: ignore[attr-defined]
        plan = picker.result.plan  # type: ignore[union-attr]
        assert plan.projector is not None and plan.projector.path == str(mmproj)
        verdict = str(picker.query_one("#plan-verdict").render())
        assert "Vision on" in verdict and "mmproj-tiny-gemma3.gguf" in verdict
        assert "of which the vision projector mmproj-tiny-gemma3.gguf" in str(picker.query_one("#plan-text").render())
        picker.query_one("#vision").value = "off"  # type: ignore[attr-defined]
        await wait_for(pilot, lambda: picker.plan_state == "ready" and picker.result.plan.projector is None)  # type: ignore[union-attr]
        assert "Vision is off" in str(picker.query_one("#plan-verdict").render())
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        assert app.session.model is not None and not app.session.model.sees
        picture = write_picture(tmp_path / "p.png", 16, 16)
        await send(app, pilot, f"/image {picture}")
        await pilot.pause(0.2)
        assert not _pending(app)
        assert any("cannot see pictures" in n.message for n in app._notifications)


async def test_the_attach_dialog_completes_and_browses(tmp_path: Path) -> None:
    from app.tui.screens.attach import AttachDialog, PathSuggester

    folder = tmp_path / "shots"
    folder.mkdir()
    write_picture(folder / "beach.png", 32, 32)
    (folder / "notes.txt").write_text("x")
    suggester = PathSuggester()
    assert await suggester.get_suggestion(str(folder / "be")) == str(folder / "beach.png")
    assert await suggester.get_suggestion(str(folder / "no")) is None  # not a file vramchat attaches
    models = tmp_path / "models"
    model, _ = write_vision_pair(models, "gemma3")
    app = make_app(models, engine=FakeEngine(), model=str(model))
    async with app.run_test(size=(150, 45)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=30)
        chat = app.screen
        await pilot.press("ctrl+t")
        await pilot.pause(0.2)
        dialog = app.screen
        assert isinstance(dialog, AttachDialog)
        field = dialog.query_one("#attach-path")
        field.value = str(folder / "beach.png")  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is chat and [a.name for a in chat.pending] == ["beach.png"])  # type: ignore[attr-defined]


def test_the_media_folder_is_under_vramchat_home() -> None:
    assert str(media_dir()).startswith(os.environ["VRAMCHAT_HOME"]) and MediaStore().folder == media_dir()


def test_only_a_terminal_that_draws_pictures_is_asked_how() -> None:
    """Asking a terminal costs its timeout when it does not answer (a pty, a plain xterm): only terminals
    known to draw pictures themselves are asked; the rest get half blocks at no cost."""
    from app.tui.widgets.picture import graphics_terminal

    assert graphics_terminal({"TERM": "xterm-kitty", "KITTY_WINDOW_ID": "1"})
    assert graphics_terminal({"TERM": "xterm-256color", "TERM_PROGRAM": "WezTerm"})
    assert graphics_terminal({"TERM": "foot"})
    assert not graphics_terminal({"TERM": "xterm-256color"})
    assert not graphics_terminal({"TERM": "screen-256color", "TMUX": "/tmp/tmux-0/default,1,0", "KITTY_WINDOW_ID": "1"})
