"""Small defects a new user met (issue 37), each as they met it."""

from __future__ import annotations

from pathlib import Path

from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import make_app, picker_ready, wait_for

SIZE = (120, 40)


def notices(app) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def test_ctrl_c_says_how_to_quit_in_plain_words(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: bool(notices(app)))
        said = "\n".join(notices(app))
        assert "Press Ctrl+Q to quit" in said and "[b]" not in said, said


async def test_a_model_without_a_projector_is_said_to_be_blind_and_not_offered_image(shelf: Path) -> None:
    from app.tui.widgets.chat_input import ChatInput
    from tests.support.tui_helpers import model_loaded

    app = make_app(shelf, FakeEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        box = app.screen.query_one(ChatInput)
        await wait_for(pilot, lambda: not box.sees)
        assert "/image" not in box.placeholder and "Ctrl+T" not in box.placeholder
        box.focus()
        box.load_text(f"/image {shelf / 'llama-f16.gguf'}")
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(notices(app)))
        said = "\n".join(notices(app))
        assert "cannot see pictures: it has no vision projector" in said and "Vision on" not in said, said


async def test_the_model_list_selects_the_first_readable_model(shelf: Path) -> None:
    (shelf / "aa-broken.gguf").write_bytes(b"not a model at all" * 8)  # listed first, by name
    app = make_app(shelf, FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        assert app.screen.selected == str(shelf / "llama-f16.gguf")
        assert app.screen.plan_state == "ready"


def test_the_status_line_names_how_the_chat_is_put_to_the_model_in_words() -> None:
    """It ended "gguf format" (the file type, not the template) for every model with a template."""
    from app.conversation.templates import choose_format
    from app.tui.widgets.chat.context_line import format_words

    template = choose_format({"tokenizer.chat_template": "{{ messages }}"}, "llama")
    family = choose_format({"general.name": "Tiny Chat Instruct"}, "qwen2")
    base = choose_format({}, "llama")
    assert [format_words(f) for f in (template, family, base)] == [
        "the model's chat template",
        "the chatml format",
        "a Q/A transcript",
    ]
