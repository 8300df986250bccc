"""The smaller defects an hour as a new user found (issue 49, points 5 to 13), each as a user meets it:
the chats list's highlight and focus, the help's tables, the runway after a retry, the chat settings'
fields, the full dashboard's page keys, the editing title, keys typed at once after Ctrl+Up, namesakes
in the model list, and the output layer in the layer counts. Cut labels at each size are
tests/tui/test_layout_sizes.py's."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from rich.text import Text
from textual import events
from textual.widgets import DataTable, Input

from app.settings import Settings
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dashboard import DashboardScreen
from app.tui.screens.dialogs import ChatSettingsDialog
from app.tui.screens.help import HELP, HelpScreen
from app.tui.screens.picker import PickerScreen
from app.tui.widgets.chat_input import EDITING_TITLES
from app.tui.widgets.dashboard import Dashboard
from tests.support.fake_engine import ElasticFakeEngine, FakeEngine
from tests.support.tui_helpers import make_app, open_chat, picker_ready, screen_text, send_and_wait, wait_for

SIZES = [(80, 24), (100, 30), (200, 50)]


# -- 5. the chats list: the highlight stays on the chat acted on, the list keeps the focus ------------


async def test_the_chats_list_keeps_the_chat_acted_on_highlighted_and_keeps_the_focus(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine(reply="Paris."))
    async with app.run_test(size=(100, 30)) as pilot:  # below 150 columns: the list is a drawer
        chat = await open_chat(app, pilot)
        for question in ("France?", "Italy?", "Spain?"):
            await pilot.press("ctrl+n")
            await send_and_wait(app, pilot, question)
        assert chat.conversation is not None
        open_id = chat.conversation.id  # Spain, the newest: first in the list
        await pilot.press("ctrl+b")
        await pilot.pause(0.1)
        chats = chat.past_chats
        assert chats.options.has_focus and chats.chosen() == open_id
        await pilot.press("down")  # Italy
        italy = chats.chosen()
        assert italy is not None and italy != open_id
        await pilot.press("r")
        await wait_for(pilot, lambda: app.screen.query("#chat-title"))
        app.screen.query_one("#chat-title", Input).value = "Rome"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is chat and chats.options.has_focus)
        assert app.store.conversation(italy).title == "Rome"
        assert chats.chosen() == italy, "the renamed chat stays highlighted"
        await pilot.press("d")  # so `d` deletes the chat just renamed, not the open one
        await pilot.pause(0.1)
        assert italy not in [c.id for c in app.store.conversations(10)] and chat.conversation.id == open_id
        assert chats.options.has_focus, "the list keeps the focus after a delete"
        await pilot.press("ctrl+z")
        await pilot.pause(0.1)
        assert italy in [c.id for c in app.store.conversations(10)]
        assert chats.options.has_focus and chats.chosen() == italy, "the chat brought back, highlighted in the list"

        # the open chat deleted from the list: a new chat opens, the list keeps the focus; Ctrl+Z too
        await pilot.press("up")
        assert chats.chosen() == open_id
        await pilot.press("d")
        await pilot.pause(0.1)
        assert chat.conversation is None and chats.options.has_focus
        await pilot.press("ctrl+z")
        await wait_for(pilot, lambda: chat.conversation is not None)
        await pilot.pause(0.1)
        assert chat.conversation.id == open_id
        assert chats.options.has_focus and chats.chosen() == open_id


# -- 7. the help: each key one row of its table, no table text shown raw -----------------------------


def test_every_row_of_the_helps_tables_names_its_key_and_no_table_is_left_as_text() -> None:
    tokens = MarkdownIt("gfm-like").parse(HELP)  # the parser Textual's Markdown widget uses
    rows: list[list[str]] = []
    for before, token in itertools.pairwise(tokens):
        if token.type == "tr_open":
            rows.append([])
        if token.type == "inline" and before.type in ("th_open", "td_open"):
            rows[-1].append(token.content)
        if token.type == "inline" and before.type == "paragraph_open":
            assert not token.content.lstrip().startswith("|"), f"a table row shown as text: {token.content[:60]!r}"
    assert rows
    for cells in rows:
        assert cells[0].strip(), f"a row without its key (one key's words split over two rows): {cells}"
    (select,) = [cells for cells in rows if "Ctrl+↑" in cells[0]]
    assert "`c` copies it" in select[1] and "`Esc` back to typing" in select[1]
    assert any("`F6`" in cells[0] for cells in rows) and any("`Delete`" in cells[0] for cells in rows)


async def test_the_help_on_screen_shows_no_table_pipes(shelf: Path) -> None:
    app = make_app(shelf)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause(0.2)
        box = app.screen.query_one("#help-box")
        seen: list[str] = []
        while True:
            seen += screen_text(app)
            if box.scroll_y >= box.max_scroll_y:
                break
            await pilot.press("pagedown")
            await pilot.pause(0.05)
        shown = "\n".join(seen)
        assert "rename this chat" in shown and "Ctrl+↑" in shown
        assert "|" not in shown, [line for line in seen if "|" in line][:3]


# -- 9. the runway after a retry ---------------------------------------------------------------------


async def test_a_retry_is_not_counted_as_a_turn_of_its_own(shelf: Path) -> None:
    engine = ElasticFakeEngine(reply="ok then")  # one token a character
    app = make_app(shelf, engine, settings=Settings(scan_known_caches=False, max_tokens=64))
    async with app.run_test(size=(160, 45)) as pilot:
        await open_chat(app, pilot)
        board = app.screen.query_one("#dashboard", Dashboard)
        pace = app.session.pace
        await send_and_wait(app, pilot, "a" * 300)
        first = pace.per_turn
        assert first is not None and first > 300
        await pilot.press("ctrl+r")  # another reply to the same question
        await wait_for(pilot, lambda: len(pace.totals) == 1 and not app.screen.generating)
        assert pace.per_turn == first, "a retry replaces its turn"
        await send_and_wait(app, pilot, "b" * 500)
        second = pace.per_turn
        assert second is not None and 500 <= second <= 560
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not app.screen.generating)
        await pilot.pause(0.1)
        assert pace.per_turn == second and len(pace.totals) == 2
        await wait_for(pilot, lambda: board.runway is not None and board.runway.per_turn == second)
        said = str(board.query_one("#runway").render())
        assert f"About {second:,} tokens a turn" in said

        await pilot.press("ctrl+n")  # a new chat: its own pace
        await pilot.pause(0.1)
        assert pace.per_turn is None


def test_one_token_a_turn_is_said_in_the_singular() -> None:
    from app.telemetry.runway import runway

    said = runway(used=27, committed=4_096, maximum=4_096, per_turn=1).sentences()[-1]
    assert said.startswith("About 1 token a turn: room for")


# -- 10. F4's fields look like fields; F3 scrolls with the page keys ----------------------------------


async def test_the_chat_settings_fields_stand_out_from_the_dialog(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine(reply="ok"))
    async with app.run_test(size=(100, 30)) as pilot:
        await open_chat(app, pilot)
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ChatSettingsDialog))
        await pilot.pause(0.1)
        dialog = app.screen.query_one("#chat-settings")
        around = dialog.background_colors[1].rgb
        for field in app.screen.query(".sampling-value").results(Input):
            own = field.background_colors[1].rgb
            # as far apart as a person sees at a glance (a filled field must not read as a label)
            assert max(abs(a - b) for a, b in zip(own, around, strict=True)) >= 20, (field.id, own, around)


@pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=["80x24", "100x30"])
async def test_the_full_dashboard_scrolls_with_the_page_keys_at_once(shelf: Path, size: tuple[int, int]) -> None:
    app = make_app(shelf, FakeEngine(reply="ok"))
    async with app.run_test(size=size) as pilot:
        await open_chat(app, pilot)
        await send_and_wait(app, pilot, "hello")
        await pilot.press("f3")
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.pause(0.3)
        body = app.screen.query_one("#dash-body")
        assert body.max_scroll_y > 0, "below 150 columns the dashboard is one column taller than the screen"
        await pilot.press("pagedown")
        await pilot.pause(0.1)
        assert body.scroll_y > 0, "PageDown scrolls without a Tab first"
        await pilot.press("end")
        await pilot.pause(0.1)
        assert body.scroll_y == body.max_scroll_y
        await pilot.press("home")
        await pilot.pause(0.1)
        assert body.scroll_y == 0


@pytest.mark.llama
async def test_the_full_dashboard_of_the_demo_scrolls_to_its_end_at_80_columns(gemma_path: Path) -> None:
    """With the demo's plots the live panel's height once came out a row short of what it holds: it scrolled
    that row itself and kept the page keys, so End never reached the table below it."""
    settings = Settings(scan_known_caches=False, max_tokens=8)
    app = make_app(None, model=str(gemma_path), settings=settings, real_engine=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ChatScreen) and app.session.model is not None, 60)
        await send_and_wait(app, pilot, "What is the capital of France?", timeout=60)
        await pilot.press("f3")
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.pause(1.5)  # the memory map and the plots drawn from the first samples
        screen = app.screen
        body = screen.query_one("#dash-body")
        for part in ("#dash-graphs", "#dash-side"):
            assert screen.query_one(part).max_scroll_y == 0, f"{part} scrolls inside the page that scrolls"
        await pilot.press("end")
        await pilot.pause(0.2)
        assert body.max_scroll_y > 0 and body.scroll_y == body.max_scroll_y
        last = screen.query_one("#dash-note").region.bottom - 1  # the notes under the table, the page's end
        assert body.region.y <= last < body.region.bottom


# -- 11. the editing title stays while the edit is pending, and fits -----------------------------------


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_editing_title_stays_whole_until_the_edit_is_sent_or_dropped(
    shelf: Path, size: tuple[int, int]
) -> None:
    app = make_app(shelf, FakeEngine(reply="Paris."))
    async with app.run_test(size=size) as pilot:
        chat = await open_chat(app, pilot)
        await send_and_wait(app, pilot, "What is the capital of France?")
        await pilot.press("ctrl+e")
        await pilot.pause(0.1)

        def title_row() -> str:
            top = chat.input.region.y
            return screen_text(app)[top]

        assert chat.controller.editing is not None and chat.input.text == "What is the capital of France?"
        assert any(t in title_row() for t in EDITING_TITLES) and "…" not in title_row(), title_row()
        for key in ("ctrl+u", "x", "ctrl+u", "ctrl+u"):  # the box emptied, typed in, emptied again
            await pilot.press(key)
            await pilot.pause(0.05)
            assert chat.controller.editing is not None and "Editing" in title_row(), (key, title_row())
        await pilot.press("escape")
        await pilot.pause(0.05)
        assert chat.controller.editing is None and "Editing" not in title_row()


# -- 13. keys typed at once after Ctrl+Up; namesakes in the model list; the output layer -----------------


async def test_keys_typed_at_once_after_ctrl_up_go_to_the_messages(shelf: Path) -> None:
    app = make_app(shelf, FakeEngine(reply="Paris."))
    async with app.run_test(size=(100, 30)) as pilot:
        chat = await open_chat(app, pilot)
        await send_and_wait(app, pilot, "What is the capital of France?")
        copied: list[str] = []
        app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
        driver = app._driver
        assert driver is not None
        # as a terminal delivers keys typed quickly: in one read, before the app has drawn anything
        for key, char in (("ctrl+up", None), ("x", "x"), ("c", "c")):
            event = events.Key(key, char)
            event.set_sender(app)
            driver.send_message(event)
        await pilot.pause(0.3)
        assert chat.input.text == "", "nothing typed after Ctrl+Up reaches the message box"
        assert chat.focused is chat.messages
        assert copied == ["Paris."], "c copied the marked message, the last one"


async def test_namesakes_in_the_model_list_are_told_apart_by_their_folders(tmp_path: Path, zoo: dict[str, Path]):
    shelf = tmp_path / "models"
    for folder in ("downloads", "backup"):
        (shelf / folder).mkdir(parents=True)
        shutil.copy(zoo["llama-f16"], shelf / folder / "tiny.gguf")
    shutil.copy(zoo["qwen3-hd"], shelf / "qwen.gguf")
    app = make_app(shelf)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        table = screen.query_one("#models", DataTable)
        await wait_for(pilot, lambda: all(e.summary is not None for e in screen.entries.values()))
        await pilot.pause(0.1)

        def name(folder: str) -> str:
            cell = table.get_cell(str(shelf / folder / "tiny.gguf"), "name")
            return cell.plain if isinstance(cell, Text) else str(cell)

        assert name("downloads") == "tiny-llama · downloads" and name("backup") == "tiny-llama · backup"
        qwen = table.get_cell(str(shelf / "qwen.gguf"), "name")
        assert isinstance(qwen, Text) and "·" not in qwen.plain  # no namesake: its name alone
        shown = "\n".join(screen_text(app))
        assert "tiny-llama · downloads" in shown and "tiny-llama · backup" in shown


def test_the_layer_count_says_the_output_layer_where_the_gpu_layers_count_it(zoo: dict[str, Path]) -> None:
    """llama.cpp's GPU layers count the output layer too: a model of 4 layers is "0/5 layers on GPU"."""
    from planner.anatomy import load_anatomy
    from planner.config import LoadConfig
    from planner.fit import evaluate
    from planner.gguf import read_gguf
    from planner.hardware import Device, GiB, Host
    from planner.report import plan_to_table

    model = load_anatomy(read_gguf(zoo["llama-f16"]))
    card = Device("Vulkan0", "gpu", "vulkan", 8 * GiB, 8 * GiB)
    table = plan_to_table(evaluate(model, LoadConfig(n_ctx=2048), [card], Host(64 * GiB, 64 * GiB)))
    n = model.n_layer
    assert f"{n} layers + the output layer" in table.splitlines()[0]
    assert f"0/{n + 1} layers on GPU" in table  # the verdict beside it: 4 layers and the output layer
