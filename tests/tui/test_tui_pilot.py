"""Pilot tests of every screen and key path, on tiny models and a fake engine (fast).

The same paths run with the real engine and the demo model in test_tui_real.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Button, DataTable, Input

from app.settings import Settings, load_settings
from app.store import Store
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dashboard import DashboardScreen
from app.tui.screens.dialogs import ChatSettingsDialog, ConfirmDialog
from app.tui.screens.help import HelpScreen
from app.tui.screens.picker import PickerScreen
from app.tui.widgets.buffers import BufferTable
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.time_plot import TimePlot
from planner.retry import MAX_RETRIES
from tests.support.fake_engine import FakeEngine
from tests.support.tui_helpers import make_app, model_loaded, open_chat, picker_ready, reply_done, wait_for

SIZE = (160, 45)
PRIMER = "Q: What is the capital of Japan?\nA: Tokyo.\n"  # the transcript's worked exchange (conversation/templates)


@pytest.fixture
def shelf(tmp_path: Path, zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    root = tmp_path / "shelf"
    root.mkdir()
    for name in ("llama-f16", "qwen3-hd"):
        shutil.copy(zoo[name], root / f"{name}.gguf")
    (root / "zz-broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    return root


def notices(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def send(app, pilot, text: str, typed: bool = False) -> None:
    box = app.screen.query_one(ChatInput)
    box.focus()
    if typed:
        await pilot.press(*text)
    else:
        box.load_text(text)  # typing is tested once; pasting the rest keeps the suite fast
    await pilot.press("enter")
    await pilot.pause(0.05)
    await wait_for(pilot, reply_done(app))
    await pilot.pause(0.05)


async def test_picker_lists_models_with_badges_and_warnings(shelf: Path) -> None:
    app = make_app(shelf)
    real_probe = app.services.probe_devices

    def probe_with_warning():
        report = real_probe()
        report.warnings.append("NVIDIA GPU found but llama.cpp was built without CUDA")
        return report

    app.services.probe_devices = probe_with_warning  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        table = screen.query_one("#models", DataTable)
        assert table.row_count == 3
        fits = {Path(key.value).name: str(table.get_cell(key, "fit")) for key in table.rows}
        assert fits["llama-f16.gguf"].startswith("full GPU")
        assert fits["zz-broken.gguf"] == "unreadable"
        assert "built without CUDA" in str(screen.query_one("#device-warnings").render())
        assert "CUDA0 7.00 GiB free of 8.00 GiB (1.00 GiB held by other processes)" in str(
            screen.query_one("#device-line").render()
        )
        assert screen.result is not None and "Memory" in str(screen.query_one("#plan-text").render())


async def test_knobs_recompute_the_plan(shelf: Path) -> None:
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        await pilot.click("#ctx")
        await pilot.press(*"1024")
        await wait_for(pilot, lambda: screen.result is not None and screen.result.plan.resolved.n_ctx == 1024)
        await pilot.click("#ngl")
        await pilot.press("2")
        await wait_for(pilot, lambda: screen.result is not None and screen.result.plan.layers_on_gpu == 2)
        assert not screen.result.solved
        # a context llama.cpp would not take: the reason is shown and Load is off
        screen.query_one("#ctx", Input).value = "12"
        await wait_for(pilot, lambda: screen.result is None)
        assert "between 256" in str(screen.query_one("#plan-verdict").render())
        assert screen.query_one("#load", Button).disabled
        # another model resets the knobs
        await pilot.click("#models")
        await pilot.press("down")
        await wait_for(pilot, lambda: screen.result is not None)
        assert screen.query_one("#ctx", Input).value == ""


async def test_load_anyway_asks_first(shelf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "none,ram=100MiB/99MiB")
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen) and screen.result is not None
        assert screen.result.plan.verdict == "no_fit"
        assert str(screen.query_one("#load", Button).label) == "Load anyway…"
        await pilot.press("ctrl+l")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("escape")  # cancel: nothing loads
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen) and app.session.model is None
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.click("#confirm")
        await wait_for(pilot, model_loaded(app))


async def test_chat_send_retry_copy_new_and_past_chats(shelf: Path) -> None:
    engine = FakeEngine()
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        await send(app, pilot, "What is the capital of France?", typed=True)
        views = list(chat.query(MessageView))
        assert [(v.role, v.text) for v in views] == [
            ("user", "What is the capital of France?"),
            ("assistant", "The capital of France is **Paris**."),
        ]
        assert "tok/s" in views[1].note
        # written to the store as sent and completed
        conv = app.store.conversation(chat.conversation.id)  # type: ignore[union-attr]
        assert [(m.role, m.state) for m in conv.messages] == [("user", "complete"), ("assistant", "complete")]
        assert engine.prompts[-1] == engine.tokenize(f"{PRIMER}Q: What is the capital of France?\nA:")

        await pilot.press("ctrl+r")
        done = reply_done(app)  # the retry has been asked of the engine, and has ended (not a pause and hope)
        await wait_for(pilot, lambda: len(engine.prompts) == 2 and done())
        assert len(engine.prompts) == 2 and len(list(chat.query(MessageView))) == 2
        assert len(app.store.conversation(conv.id).messages) == 2

        await pilot.press("ctrl+o")
        assert app.clipboard == "The capital of France is **Paris**."

        await pilot.press("ctrl+n")
        await pilot.pause()
        assert chat.conversation is None and not list(chat.query(MessageView))
        await send(app, pilot, "Second chat")
        assert len(app.store.conversations()) == 2

        chat.action_toggle_chats()
        chat.action_toggle_chats()
        await pilot.click("#chat-list")
        await pilot.press("end", "enter")  # the oldest chat is last
        await wait_for(pilot, lambda: chat.conversation is not None and chat.conversation.id == conv.id)
        await pilot.pause()
        assert next(v.text for v in chat.query(MessageView)) == "What is the capital of France?"


async def test_a_replys_news_still_queued_when_the_app_quits_is_dropped(shelf: Path) -> None:
    """Ctrl+Q while a reply streams: what the engine said last (the prompt fitted, read, a piece of the reply, its
    end) finds the chat's widgets removed, and is dropped rather than ending vramchat on an error."""
    from app.conversation.outcome import ReplyOutcome
    from app.engine.types import GenerationStats, PromptProgress
    from app.tui.messages import PromptFitted, PromptRead, ReplyFinished, ReplyPiece

    app = make_app(shelf, FakeEngine())
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        await send(app, pilot, "What is the capital of France?")
        reply_id = chat.reply.msg_id
    assert not app.is_running and not chat.query("#context-line")  # quit: the chat's widgets are gone
    with app._context():  # as the app's loop would handle them, while it closes
        chat.on_prompt_fitted(PromptFitted(12, 4096, 0, False))
        chat.on_prompt_read(PromptRead(reply_id, PromptProgress(6, 12)))
        await chat.on_reply_piece(ReplyPiece(reply_id, "Paris"))
        await chat.on_reply_finished(ReplyFinished(reply_id, ReplyOutcome("user", "Paris", GenerationStats())))


async def test_escape_stops_a_reply_at_once(shelf: Path) -> None:
    engine = FakeEngine(reply=" ".join(f"word{i}" for i in range(400)), delay=0.02)
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        chat.query_one(ChatInput).focus()
        await pilot.press(*"Tell me a story", "enter")
        await wait_for(pilot, lambda: engine.last_stats.generated_tokens >= 3)
        await pilot.press("escape")
        await wait_for(pilot, reply_done(app))
        assert engine.last_stats.stopped_by == "user"
        assert engine.last_stats.generated_tokens < 100
        await pilot.pause(0.05)
        reply = app.store.conversation(chat.conversation.id).messages[-1]  # type: ignore[union-attr]
        assert reply.state == "partial" and reply.content.startswith("word0 word1")
        assert "stopped" in list(chat.query(MessageView))[-1].note


async def test_multiline_input(shelf: Path) -> None:
    engine = FakeEngine()
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        box = chat.query_one(ChatInput)
        box.focus()
        await pilot.press("a", "ctrl+j", "b")
        assert box.text == "a\nb"
        await pilot.press("shift+enter", "c")
        assert box.text == "a\nb\nc"
        await pilot.press("enter")
        await wait_for(pilot, reply_done(app))
        await pilot.pause(0.05)
        assert box.text == ""
        assert next(iter(chat.query(MessageView))).text == "a\nb\nc"


async def test_chat_settings_apply_and_persist(shelf: Path) -> None:
    engine = FakeEngine()
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        await open_chat(app, pilot)
        await pilot.press("f4")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ChatSettingsDialog)
        await pilot.press(*"Answer in one word.")
        dialog.query_one("#temperature", Input).value = "3"
        await pilot.click("#save")
        assert "between 0 and 2" in str(dialog.query_one("#settings-error").render())
        dialog.query_one("#temperature", Input).value = "0.5"
        dialog.query_one("#max-tokens", Input).value = "7"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen), str(dialog.query_one("#settings-error").render())
        await send(app, pilot, "Capital of France?")
        assert engine.params[-1].max_tokens == 7 and engine.params[-1].temperature == 0.5
        assert engine.prompts[-1] == engine.tokenize(f"Answer in one word.\n{PRIMER}Q: Capital of France?\nA:")
        # the sampling is the chat's own, kept with it; the system prompt is also new chats' default
        assert app.store.conversation(app.screen.conversation.id).settings == {"temperature": 0.5, "max_tokens": 7}
    saved, _ = load_settings()
    assert (saved.system_prompt, saved.temperature) == ("Answer in one word.", None)


async def test_context_nearly_full_drops_old_turns(shelf: Path) -> None:
    engine = FakeEngine(reply="ok", n_ctx=256)
    app = make_app(shelf, engine, settings=Settings(scan_known_caches=False, max_tokens=64))
    async with app.run_test(size=SIZE) as pilot:
        await open_chat(app, pilot)
        for i in range(4):
            await send(app, pilot, f"question number {i} " + "x" * 40)
        assert any("oldest" in n and "left out" in n for n in notices(app))
        # the prompt still ends with the newest question, and fits
        assert len(engine.prompts[-1]) <= 256 - 64


async def test_help_palette_dashboard_and_theme(shelf: Path) -> None:
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        await pilot.press("f2")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)
        assert "no model loaded" in str(app.screen.query_one("#context-line").render())
        await pilot.press("f2")
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)

        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        await pilot.press("f3")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        table = app.screen.query_one(BufferTable)
        assert table.row_count >= 4
        await pilot.pause(0.6)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)

        await pilot.press("ctrl+p")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "CommandPalette"
        await pilot.press(*"theme: vramchat light", "enter")
        await pilot.pause(0.3)
        assert app.theme == "vramchat-light"
    assert load_settings()[0].theme == "vramchat-light"


async def test_load_failure_is_a_dialog_not_a_traceback(shelf: Path) -> None:
    engine = FakeEngine(fail_load="could not load the model: unknown model architecture: 'zz'")
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        assert "unknown model architecture" in str(app.screen.query_one(".dialog-text").render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        assert app.session.model is None
    assert len(engine.loads) == 1  # not a memory failure: no smaller plan is tried


async def test_a_load_out_of_memory_is_retried_with_a_smaller_plan(shelf: Path) -> None:
    engine = FakeEngine(out_of_memory_loads=1)
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        first, second = engine.loads
        # host RAM refused the KV cache: the planner's rule halves the context
        assert second.n_ctx == first.n_ctx // 2
        model = app.session.model
        assert model is not None and model.plan.config == second
        assert model.changes[0] == f"context {first.n_ctx:,} → {second.n_ctx:,} tokens"
        text = "\n".join(notices(app))
        assert "Not enough memory" in "\n".join(str(n.title) for n in app._notifications)
        assert f"{first.n_ctx:,} → {second.n_ctx:,}" in text and "smaller plan" in text
        assert "host RAM (CPU) could not allocate 1.00 GiB" in text  # the pool and size llama.cpp could not allocate
        assert f"{second.n_ctx:,} tokens" in app.screen.sub_title


async def test_a_load_that_cannot_succeed_ends_in_the_picker(shelf: Path) -> None:
    engine = FakeEngine(out_of_memory_loads=99)
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), timeout=30)
        text = str(app.screen.query_one(".dialog-text").render())
        assert "failed to allocate" in text and "smaller plans" in text and "model list" in text
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        assert app.session.model is None
    contexts = [c.n_ctx for c in engine.loads]
    assert len(contexts) == 1 + MAX_RETRIES and contexts == sorted(contexts, reverse=True)


async def test_out_of_memory_mid_reply_keeps_the_chat_and_reloads_smaller(shelf: Path) -> None:
    engine = FakeEngine(reply="one two three four five six", out_of_memory_after=3)
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        await send(app, pilot, "count for me")
        await wait_for(pilot, lambda: len(engine.loads) == 2 and model_loaded(app)())
        first, second = engine.loads
        assert second.n_ctx < first.n_ctx
        conv = app.store.conversation(chat.conversation.id)  # type: ignore[union-attr]
        assert [m.role for m in conv.messages] == ["user", "assistant"]
        assert conv.messages[1].content == "one two three" and conv.messages[1].state == "partial"
        assert any("Out of memory" in str(n.title) for n in app._notifications)
        assert any("conversation is kept" in n for n in notices(app))
        # the user carries on in the same chat, with the whole conversation in the prompt
        await send(app, pilot, "again")
        conv = app.store.conversation(conv.id)
        assert [m.role for m in conv.messages] == ["user", "assistant", "user", "assistant"]
        assert conv.messages[-1].content == "one two three four five six"
        prompt = "".join(chr(t) for t in engine.prompts[-1])
        assert "count for me" in prompt and "again" in prompt


async def test_model_argument_loads_it(shelf: Path) -> None:
    app = make_app(None, model=str(shelf / "qwen3-hd.gguf"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, model_loaded(app))
        assert app.session.model is not None and app.session.model.path.endswith("qwen3-hd.gguf")


async def test_a_reply_cut_by_a_crash_is_shown(shelf: Path) -> None:
    store = Store()
    conv = store.new_conversation(str(shelf / "llama-f16.gguf"), "tiny llama")
    store.add_message(conv.id, "user", "Count to ten")
    reply = store.begin_reply(conv.id)
    store.update_reply(reply, "one two three")
    store.close()  # the app died before finishing the reply: the row is still 'streaming'

    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # said at the start, for 10 s: read before the picker's plan, which takes longer on a busy machine
        assert any("cut short" in n for n in notices(app))
        await wait_for(pilot, picker_ready(app))
        await pilot.press("f2")
        await pilot.pause()
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await chat.open_conversation(conv.id)
        await pilot.pause()
        views = list(chat.query(MessageView))
        assert views[-1].text == "one two three" and "cut short" in views[-1].note


async def test_projector_and_split_notes(shelf: Path) -> None:
    (shelf / "mmproj-tiny-f16.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        assert len(screen.entries) == 3  # the projector is not listed as a model
        assert "Vision projector beside it: mmproj-tiny-f16.gguf" in str(screen.query_one("#plan-verdict").render())


async def test_a_failing_scan_is_reported(shelf: Path) -> None:
    app = make_app(shelf)

    def explode():
        raise RuntimeError("probe exploded")

    app.services.probe_devices = explode  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: any("probe exploded" in n for n in notices(app)))
        assert isinstance(app.screen, PickerScreen) and not app.screen._scanning


async def test_a_model_that_cannot_chat_is_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.tiny import TinySpec, write_tiny_model

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB,ram=32GiB")
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    write_tiny_model(shelf / "dream.gguf", TinySpec("dream", name="Tiny Dream"))
    engine = FakeEngine()
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        assert "no KV cache" in str(app.screen.query_one("#plan-text").render())
        await pilot.press("ctrl+l")
        await pilot.pause(0.2)
        assert isinstance(app.screen, PickerScreen)
        assert any("diffusion language model" in n and "cannot chat" in n for n in notices(app))
    assert engine.loads == []


async def test_the_context_grows_with_the_chat_and_a_new_chat_gives_memory_back(shelf: Path) -> None:
    from tests.support.fake_engine import ElasticFakeEngine

    engine = ElasticFakeEngine(reply="ok")
    app = make_app(shelf, engine, settings=Settings(scan_known_caches=False, max_tokens=64))
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        model = app.session.model
        assert model.n_ctx == 4096 and model.max_ctx == 8192  # a small context at load, the plan's maximum reserved
        kv = chat.query_one("#p-kv", TimePlot)

        def legend() -> str:
            return " ".join(kv.legend_text())

        await wait_for(pilot, lambda: "committed 4.0 MiB" in legend())
        assert "in use" in legend() and "planned max" in legend()

        await send(app, pilot, "x" * 5000)  # one token a character: more than 4,096 tokens
        assert engine.resizes == [6144] and model.n_ctx == 6144  # the next step: 4,096 -> 6,144 -> 8,192
        await wait_for(pilot, lambda: "committed 6.0 MiB" in legend())
        assert "6,144 of 8,192" in str(chat.sub_title)

        await pilot.press("ctrl+n")  # a new chat shrinks the context back to its start
        await wait_for(pilot, lambda: model.n_ctx == 4096)
        assert engine.resizes == [6144, 4096]
        await wait_for(pilot, lambda: "committed 4.0 MiB" in legend())


async def test_a_context_that_cannot_grow_keeps_its_size_and_drops_old_turns(shelf: Path) -> None:
    from tests.support.fake_engine import ElasticFakeEngine

    engine = ElasticFakeEngine(reply="ok", fail_growth=True)
    app = make_app(shelf, engine, settings=Settings(scan_known_caches=False, max_tokens=64))
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        await send(app, pilot, "a" * 3000)
        await send(app, pilot, "b" * 3000)  # both turns no longer fit 4,096 tokens
        assert app.session.model.n_ctx == 4096 and engine.resizes == []
        assert any("could not grow" in n for n in notices(app))
        assert any("left out of the prompt" in n for n in notices(app))
        assert len(engine.prompts[-1]) <= 4096 and len(list(chat.query(MessageView))) == 4  # nothing lost


async def test_export_a_chat_and_search_past_chats(shelf: Path, _private_home: Path) -> None:
    engine = FakeEngine(reply="Paris is the capital.")
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(app, pilot)
        await send(app, pilot, "What is the capital of France?")
        await pilot.press("ctrl+s")
        await pilot.pause()
        saved = [n for n in notices(app) if n.startswith("Saved as Markdown")]
        assert saved
        path = Path(saved[-1].splitlines()[-1])
        text = path.read_text()
        assert path.suffix == ".md" and "## You\n\nWhat is the capital of France?" in text
        assert "Paris is the capital." in text

        await pilot.press("ctrl+n")
        await pilot.pause()
        await send(app, pilot, "Tell me about bananas")
        search = chat.query_one("#chat-search", Input)
        search.value = "capital of france"
        await pilot.pause()
        options = chat.query_one("#chat-list")
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert len(labels) == 1 and "What is the capital of France?" in labels[0]
        search.value = "no such words"
        await pilot.pause()
        assert "No chat mentions" in str(options.get_option_at_index(0).prompt)
        search.value = ""
        await pilot.pause()
        assert options.option_count == 2


async def test_a_first_start_lists_and_plans_the_models_while_the_demo_is_assembled(
    shelf: Path, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Assembling the demo takes seconds on a first start: the other models are listed and planned
    meanwhile, and the demo joins the list, planned, when it is whole."""
    import threading

    import app.demo

    released = threading.Event()

    def demo_model_path(assemble: bool = True) -> Path:
        if not assemble:
            raise app.demo.DemoUnavailable("the demo model has not been assembled yet")
        assert released.wait(30)
        return gemma_path

    monkeypatch.setattr(app.demo, "demo_model_path", demo_model_path)
    vramchat = make_app(shelf, include_demo=True)
    async with vramchat.run_test(size=SIZE) as pilot:
        screen = vramchat.screen
        assert isinstance(screen, PickerScreen)
        table = screen.query_one("#models", DataTable)

        def fits() -> dict[str, str]:
            return {Path(key.value).name: str(table.get_cell(key, "fit")) for key in table.rows}

        await wait_for(pilot, lambda: len(fits()) == 3 and "planning…" not in fits().values())
        assert screen._scanning and "preparing the demo model" in str(screen.query_one("#scan-status").render()).lower()
        released.set()
        await wait_for(pilot, picker_ready(vramchat))
        assert fits()[gemma_path.name].startswith("full GPU")
        assert str(table.get_cell(str(gemma_path), "source")) == "demo"


async def test_a_badge_is_shown_whole_estimate_included(shelf: Path) -> None:
    """The fit column is wide enough for the longest badge: "· estimate" was cut to "· est"."""
    from tests.support.tiny import TinySpec, write_tiny_model

    write_tiny_model(shelf / "tiny-zebra.gguf", TinySpec("zebra"))  # an architecture without rules
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, picker_ready(app))
        table = app.screen.query_one("#models", DataTable)
        badges = [table.get_cell(key, "fit") for key in table.rows]
        assert any(str(b).endswith("· estimate") for b in badges)
        column = next(c for c in table.columns.values() if c.key.value == "fit")
        width = column.get_render_width(table) - 2 * table.cell_padding
        longest = "partial · 12/33 layers · estimate ↻"
        assert all(b.cell_len <= width for b in badges) and len(longest) <= width
