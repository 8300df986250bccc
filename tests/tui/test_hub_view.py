"""The hub view (F7) against the local hub: the real huggingface_hub client on 127.0.0.1 (tests/remote/conftest.py).

Search and open a repo, every quant badged as the picker badges the same file; a download with progress
that is cancelled (nothing in the list) and resumed to the end, listed, selected and loaded; a full disk
refused before a byte; the hub gone (repos seen before from the cache, the picker still working); the
first start without models of one's own landing here once; the real demo downloaded and answering.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from app.catalog import fit_badge, summarize
from app.discovery import Folder, scan
from app.paths import models_dir
from app.settings import Settings, load_settings
from app.tui.hub_messages import QuantPlanned, RepoBadged, ReposFound
from app.tui.screens.chat import ChatScreen
from app.tui.screens.dialogs import ConfirmDialog
from app.tui.screens.hub import HubScreen
from app.tui.screens.picker import PickerScreen
from tests.remote.conftest import REPO
from tests.support.fake_engine import FakeEngine
from tests.support.hub_server import LocalHub
from tests.support.speed import fixed_speed
from tests.support.tui_helpers import make_app, model_loaded, picker_ready, reply_done, screen_text, wait_for

SIZE = (160, 45)
DEMO_FILE = "gemma-3-270m-Q4_K_M.gguf"


def notices(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


def text_of(app) -> str:
    return "\n".join(screen_text(app))


async def open_hub(app, pilot) -> HubScreen:
    """F7 from the picker: the hub's most downloaded chat repos, each badged."""
    await wait_for(pilot, picker_ready(app))
    await pilot.press("f7")
    await wait_for(pilot, lambda: isinstance(app.screen, HubScreen))
    hub = app.screen
    assert isinstance(hub, HubScreen)
    await wait_for(pilot, lambda: bool(hub.repos) and len(hub.fits) == len(hub.repos))
    return hub


async def open_repo(pilot, hub: HubScreen, repo_id: str = REPO) -> None:
    table = hub.query_one("#hub-repos", DataTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(repo_id))
    await pilot.press("enter")
    await wait_for(pilot, lambda: hub.planned == repo_id, timeout=30)
    await pilot.pause(0.1)


async def start_download(app, pilot, hub: HubScreen, quant: str = "Q4_K_M") -> None:
    """Enter on the quant (a single-file one), then Download in the dialog that says what it will write."""
    index = next(i for i, m in enumerate(hub.models) if m.quant == quant and len(m.files) == 1)
    table = hub.query_one("#hub-quants", DataTable)
    table.focus()
    table.move_cursor(row=index)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
    await pilot.press("enter")  # the dialog's Download button has the focus
    await wait_for(
        pilot, lambda: hub.download.downloading is not None or hub.download.stopped is not None or bool(hub.downloaded)
    )


def _listed(folder: Path) -> list[str]:
    return sorted(Path(m.path).name for m in scan([Folder(folder, "vramchat")]))


async def test_search_and_open_a_repo_every_quant_badged_as_the_picker_badges_it(
    hub: LocalHub, shelf: Path, repo_files: dict[str, Path], zoo: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app import quants as quant_planning

    # the speed model fills the tok/s column through this one function (tests/remote: the real figures)
    monkeypatch.setattr(quant_planning, "predicted_speed", lambda planned: fixed_speed(42.0))
    hub.add_repo("acme/tiny-llama-GGUF", {"tiny-llama-F16.gguf": zoo["llama-f16"]}, downloads=50)
    hub.add_repo("other/unrelated-GGUF", {"unrelated-Q8_0.gguf": zoo["qwen3-hd"]}, downloads=10, pipeline_tag="x")
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hub(app, pilot)
        # the most downloaded chat repos first (the unrelated pipeline is not a chat model), each badged
        assert [r.repo_id for r in screen.repos] == [REPO, "acme/tiny-llama-GGUF"]
        repos = screen.query_one("#hub-repos", DataTable)
        assert str(repos.get_cell(REPO, "quant")) == "Q4_K_M"
        assert str(repos.get_cell(REPO, "fit")) == "full GPU · 32,768 tok"
        assert "most downloaded GGUF chat models" in text_of(app)

        # typing in the list searches the hub (its own search): the letters go to the search box
        await pilot.press(*"tiny", "enter")
        await wait_for(pilot, lambda: screen.query_text == "tiny" and len(screen.fits) == len(screen.repos) == 1)
        assert [r.repo_id for r in screen.repos] == ["acme/tiny-llama-GGUF"]
        assert str(repos.get_cell("acme/tiny-llama-GGUF", "quant")) == "F16"
        # an answer to words the user has since changed is dropped
        screen.post_message(ReposFound(screen.work.search_request - 1, "gemma", [], error="stale"))
        await pilot.pause(0.1)
        assert [r.repo_id for r in screen.repos] == ["acme/tiny-llama-GGUF"] and "stale" not in text_of(app)

        await pilot.press("ctrl+f", *"gemma", "enter")
        await wait_for(pilot, lambda: screen.query_text == "gemma" and len(screen.fits) == len(screen.repos) == 1)
        await open_repo(pilot, screen)
        quants = screen.query_one("#hub-quants", DataTable)
        assert quants.row_count == len(screen.models) == 6  # 5 quants and the split Q8_0, the projector beside them
        report = app.services.devices
        for model, row in zip(screen.models, screen.rows):
            assert row is not None and row.result is not None, row
            local = repo_files[model.files[0].name]
            picker_badge = fit_badge(summarize(str(local), report.gpus, report.host))[0]
            assert fit_badge(row.summary)[0] == picker_badge == str(quants.get_cell(model.ref, "fit"))
        # the best marked, with why; the cursor on it
        assert screen.best is not None and screen.rows[screen.best].quant == "F16"
        assert str(quants.get_cell(screen.models[screen.best].ref, "mark")).startswith("★")
        assert quants.cursor_row == screen.best
        text = text_of(app)
        assert "★ Best here: F16: the largest quant that runs wholly on the GPU at 32,768 tokens" in text
        assert "Q8_0 (2 files)" in text and "with mmproj-F16.gguf" in text
        assert {"ctx", "speed", "layers", "kv"} <= {c.value for c in quants.columns}
        assert str(quants.get_cell(screen.models[0].ref, "speed")) == "29–55" and "tok/s" in text
        assert not _listed(models_dir())  # nothing was downloaded to plan them
        # at 80 columns the speed stays: the figure a quant is picked by (it was the first column dropped)
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: quants.size.width < 80)
        await pilot.pause(0.1)
        assert "speed" in {c.value for c in quants.columns}, [c.value for c in quants.columns]


async def test_a_cancelled_download_leaves_nothing_in_the_list_then_resumes_and_loads(
    hub: LocalHub, shelf: Path, gemma_path: Path
) -> None:
    engine = FakeEngine(reply="Paris.")
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hub(app, pilot)
        await open_repo(pilot, screen)
        hub.rate = 40 << 20  # 40 MiB/s: the demo takes about 6 s, long enough to watch and cancel
        await start_download(app, pilot, screen)
        status = screen.query_one("#download-status")
        await wait_for(pilot, lambda: screen.download.last_done > 30 << 20)
        words = str(status.render())
        assert "Downloading gemma-3-270m-Q4_K_M.gguf: " in words and "MiB/s" in words and " left" in words
        assert "Cancel download" in screen_text(app)[-1]  # the key shows while a download runs
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: screen.download.downloading is None)
        assert screen.download.stopped is not None and "Cancelled gemma-3-270m-Q4_K_M.gguf" in str(status.render())
        folder = models_dir() / "acme" / "gemma-3-270m-GGUF"
        assert _listed(models_dir()) == []  # nothing half-written in the list
        assert (folder / f".{DEMO_FILE}.partial").stat().st_size > 30 << 20  # kept, hidden, to resume
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        await pilot.press("f5")
        await wait_for(pilot, picker_ready(app))
        assert [Path(p).name for p in app.screen.entries] == ["llama-f16.gguf"]

        # resumed where it stopped, checked, then listed, selected and planned in the model list
        await pilot.press("f7")
        await wait_for(pilot, lambda: app.screen is screen)
        hub.rate = None
        hub.clear_log()
        screen.query_one("#download-resume").press()
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen), timeout=60)
        ranges = [e.range for e in hub.requests("/_cdn/") if e.method == "GET"]
        assert ranges and ranges[0] is not None and int(ranges[0][6:-1]) > 30 << 20
        path = folder / DEMO_FILE
        assert path.read_bytes() == gemma_path.read_bytes()
        assert "(sha256 checked)" in str(status.render())
        assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # no partial left
        picker = app.screen
        assert isinstance(picker, PickerScreen)
        await wait_for(pilot, picker_ready(app))
        assert picker.selected == str(path) and picker.plan_state == "ready"
        table = picker.query_one("#models", DataTable)
        assert str(table.get_cell(str(path), "fit")) == "full GPU · 32,768 tok"
        assert any("is downloaded and selected" in n for n in notices(app))
        await pilot.press("enter")  # loads at once
        await wait_for(pilot, model_loaded(app))
        assert app.session.model is not None and app.session.model.path == str(path)


async def test_a_full_disk_is_refused_before_the_download_starts(
    hub: LocalHub, shelf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.sources import download

    monkeypatch.setattr(download, "free_bytes", lambda folder: 100 << 20)
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hub(app, pilot)
        await open_repo(pilot, screen)
        table = screen.query_one("#hub-quants", DataTable)
        table.focus()
        table.move_cursor(row=next(i for i, m in enumerate(screen.models) if m.quant == "Q4_K_M"))
        hub.clear_log()  # the headers were read to plan; from here, not a byte
        await pilot.press("enter")
        await wait_for(pilot, lambda: "is free in" in str(screen.query_one("#download-status").render()))
        assert not isinstance(app.screen, ConfirmDialog)  # refused before asking
        words = str(screen.query_one("#download-status").render())
        assert "needs 241.6 MiB (and 64.0 MiB to spare), 100.0 MiB is free in" in words
        assert any("Not enough disk space" in str(n.title) for n in app._notifications)
        assert not hub.requests("/_cdn/") and not models_dir().exists()


async def test_offline_the_hub_says_so_repos_seen_before_plan_from_the_cache_and_the_picker_works(
    hub: LocalHub, shelf: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    engine = FakeEngine()
    app = make_app(shelf, engine)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hub(app, pilot)
        await open_repo(pilot, screen)
        badges = [fit_badge(r.summary)[0] for r in screen.rows if r is not None]
        hub.stop()  # the hub is gone

        await pilot.press("ctrl+f", *"gemma", "enter")
        await wait_for(pilot, lambda: screen.query_text == "gemma" and screen.offline != "")
        await wait_for(pilot, lambda: len(screen.fits) == len(screen.repos) == 1)
        text = text_of(app)
        assert "The hub cannot be reached: searching the hub: cannot connect" in text
        assert "1 repo seen before, from the cache" in text
        assert str(screen.query_one("#hub-repos", DataTable).get_cell(REPO, "fit")) == "full GPU · 32,768 tok"
        await open_repo(pilot, screen)  # its listing and headers from the cache
        assert [fit_badge(r.summary)[0] for r in screen.rows if r is not None] == badges
        assert f"{REPO}: 6 of 6 models planned from the cache (the hub cannot be reached)" in text_of(app)

        await pilot.press("f7")  # the local models still plan and load
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app))
        assert isinstance(app.screen, ChatScreen)
    # nothing on stderr, which is the screen: huggingface_hub's retries, vramchat's notes (toasts instead)
    err = capfd.readouterr().err
    assert "Retrying" not in err and "thrown while requesting" not in err and "vramchat: note" not in err
    assert any("as listed on" in n for n in notices(app))
    from app import sources

    assert sources._note_sink is sources._stderr_note  # the app gone, notes go to stderr again


@pytest.mark.parametrize("demo", [False, True], ids=["no-models", "only-the-demo"])
async def test_a_first_start_without_models_of_ones_own_lands_in_the_hub_once(
    hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gemma_path: Path, demo: bool
) -> None:
    from app import demo as demo_module

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    monkeypatch.setattr(demo_module, "demo_model_path", lambda assemble=True: gemma_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    app = make_app(empty, include_demo=demo)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, HubScreen))
        screen = app.screen
        assert isinstance(screen, HubScreen)
        await wait_for(pilot, lambda: bool(screen.repos) and len(screen.fits) == len(screen.repos))
        repos = screen.query_one("#hub-repos", DataTable)
        assert str(repos.get_cell(REPO, "fit")) == "full GPU · 32,768 tok"  # badged for this machine
        assert load_settings()[0].hub_on_first_start is False
        # the palette has the view's actions, and the way back and forth
        commands = {c.title: c.callback for c in app.get_system_commands(screen)}
        assert {"Search the hub", "Download the selected quant", "Back to the model list"} <= set(commands)
        commands["Back to the model list"]()
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        commands = {c.title: c.callback for c in app.get_system_commands(app.screen)}
        commands["Hugging Face hub"]()
        await wait_for(pilot, lambda: app.screen is screen)  # the same view, as it was left
        assert screen.fits[REPO].summary is not None
    again = make_app(empty, settings=load_settings()[0], include_demo=demo)
    async with again.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(again.screen, PickerScreen) and not again.screen._scanning)
        await pilot.pause(0.3)
        assert isinstance(again.screen, PickerScreen)  # once: the setting remembers
        assert demo or "F7 finds one on the Hugging Face hub" in text_of(again)


@pytest.mark.llama
async def test_the_demo_downloaded_from_the_hub_loads_in_the_real_engine_and_answers(
    hub: LocalHub, tmp_path: Path, gemma_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    settings = Settings(scan_known_caches=False, temperature=0.0, max_tokens=16)
    app = make_app(empty, settings=settings, real_engine=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, HubScreen))  # a first start lands here
        screen = app.screen
        assert isinstance(screen, HubScreen)
        await wait_for(pilot, lambda: bool(screen.repos) and len(screen.fits) == len(screen.repos))
        await open_repo(pilot, screen)
        await start_download(app, pilot, screen)
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen), timeout=60)
        await wait_for(pilot, picker_ready(app))
        await pilot.press("ctrl+l")
        await wait_for(pilot, model_loaded(app), timeout=60)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        box = chat.query_one("#input")
        box.focus()
        box.load_text("What is the capital of France?")
        await pilot.press("enter")
        await pilot.pause(0.05)
        await wait_for(pilot, reply_done(app), timeout=60)
        conv = app.store.conversation(chat.conversation.id)  # type: ignore[union-attr]
        assert "Paris" in conv.messages[-1].content


def test_quitting_does_not_wait_for_the_hub(hub: LocalHub) -> None:
    """The real app in a terminal, its hub view reading headers at 1 KB/s (hours each): Ctrl+Q ends it at
    once, the reads abandoned (Textual waits for its thread workers; those that wait on the network give up
    when cancelled)."""
    from tests.support.pty_app import PtyApp, until

    hub.rate = 1000
    app = PtyApp()
    try:
        until(lambda: app.shown("planning…"), 60, "the hub view badging its repos")
        app.type("\x11")  # Ctrl+Q
        until(lambda: app.proc.poll() is not None, 15, "the app to end")
        assert app.proc.returncode == 0
    finally:
        if app.proc.poll() is None:
            app.kill()


async def test_a_first_start_offline_stays_on_the_models_here_and_tries_the_hub_next_time(
    hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gemma_path: Path
) -> None:
    """No hub to reach (this machine is offline): a first start with only the demo does not leave the
    user in an empty hub view; it says why, hands back to the model list with the demo selected, and
    keeps the landing for a start that can reach the hub."""
    from app import demo as demo_module

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    monkeypatch.setattr(demo_module, "demo_model_path", lambda assemble=True: gemma_path)
    hub.stop()
    empty = tmp_path / "empty"
    empty.mkdir()
    app = make_app(empty, include_demo=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: any("cannot be reached" in n for n in notices(app)))
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        assert app.screen.selected is not None and app.screen.entries[app.screen.selected].file.is_demo
        assert any("F7 opens the hub when this machine is online" in n for n in notices(app))
    assert load_settings()[0].hub_on_first_start is True


def _status(screen: HubScreen) -> str:
    return str(screen.query_one("#hub-status").render())


async def test_after_a_first_start_offline_f7_says_the_hub_cannot_be_reached_and_lists_it_once_it_answers(
    hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gemma_path: Path
) -> None:
    """Issue 37: after a first start offline, F7 said "Asking the hub..." forever, also once the hub was
    back. It says why and what to do, and asks again: on F7 (coming back) and on F5."""
    from app import demo as demo_module

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,ram=32GiB/8GiB")
    monkeypatch.setattr(demo_module, "demo_model_path", lambda assemble=True: gemma_path)
    port = hub.port
    hub.stop()
    empty = tmp_path / "empty"
    empty.mkdir()
    app = make_app(empty, include_demo=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen) and app.screen.selected is not None)
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, HubScreen))
        screen = app.screen
        assert isinstance(screen, HubScreen)
        await wait_for(pilot, lambda: "cannot be reached" in _status(screen))
        assert "Asking the hub" not in text_of(app)
        assert "is this machine online?" in _status(screen) and "F5 asks again" in _status(screen)

        hub.start(port)  # the network is back: coming back to the view asks again
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        await pilot.press("f7")
        await wait_for(pilot, lambda: app.screen is screen and bool(screen.repos) and not screen.offline)
        assert [r.repo_id for r in screen.repos] == [REPO] and "most downloaded" in _status(screen)

        hub.stop()  # and F5 asks again where the view stays
        await pilot.press("f5")
        await wait_for(pilot, lambda: "cannot be reached" in _status(screen))
        hub.start(port)
        await pilot.press("f5")
        await wait_for(pilot, lambda: not screen.offline and "most downloaded" in _status(screen))
        commands = {c.title for c in app.get_system_commands(screen)}
        assert "Ask the hub again" in commands and "F5" in help_text()


def help_text() -> str:
    from app.tui.screens.help import HELP

    return HELP


async def test_a_failed_checksum_offers_to_download_again_not_to_resume_a_file_that_is_gone(
    hub: LocalHub, shelf: Path, gemma_path: Path
) -> None:
    """Issue 37: after a failed checksum the view offered Resume (which started from 0) and Delete the
    partial file (there was none). It says the checksum failed and offers Download again, which starts over."""
    hub.add_repo("acme/damaged-GGUF", {DEMO_FILE: gemma_path}, downloads=2000, wrong_sha256={DEMO_FILE})
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hub(app, pilot)
        await open_repo(pilot, screen, "acme/damaged-GGUF")
        await start_download(app, pilot, screen)
        await wait_for(pilot, lambda: screen.download.stopped is not None, timeout=60)
        words = str(screen.query_one("#download-status").render())
        assert "the checksum failed" in words and "nothing of it is kept" in words
        assert any(n.title == "Checksum failed" for n in app._notifications)
        folder = models_dir() / "acme" / "damaged-GGUF"
        assert not [p.name for p in folder.iterdir() if p.name.endswith((".partial", ".partial.json"))]
        resume = screen.query_one("#download-resume")
        assert resume.display and str(resume.label) == "Download again"
        assert not screen.query_one("#download-discard").display
        # the footer redraws its keys after the next refresh (Textual's Footer recomposes then)
        await wait_for(pilot, lambda: "Download again" in screen_text(app)[-1])
        footer = screen_text(app)[-1]
        assert "Resume" not in footer and "Delete" not in footer
        commands = {c.title for c in app.get_system_commands(screen)}
        assert "Download again" in commands and "Resume the download" not in commands

        hub.clear_log()
        await pilot.press("ctrl+r")  # from the start: no range asked
        await wait_for(pilot, lambda: bool([e for e in hub.requests("/_cdn/") if e.method == "GET"]))
        assert next(e.range for e in hub.requests("/_cdn/") if e.method == "GET") in (None, "bytes=0-")
        await wait_for(pilot, lambda: screen.download.downloading is None, timeout=60)


async def test_a_download_left_behind_shows_its_progress_in_the_other_screens_and_says_when_it_is_done(
    hub: LocalHub, shelf: Path
) -> None:
    """Issue 37: leaving the hub mid-download hid its progress. The model list's title line gives it,
    a notification says when it is whole, and the hub shows it again when the user comes back."""
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hub(app, pilot)
        await open_repo(pilot, screen)
        hub.rate = 30 << 20  # about 8 s
        await start_download(app, pilot, screen)
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        await wait_for(pilot, lambda: f"↓ {DEMO_FILE} " in screen_text(app)[0], timeout=30)
        first = screen_text(app)[0]
        assert "vramchat — " in first and "%" in first
        await pilot.press("f7")  # back: the hub's panel has it all, its title line not
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.pause(0.2)
        assert "↓" not in screen_text(app)[0]
        assert f"Downloading {DEMO_FILE}: " in str(screen.query_one("#download-status").render())
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        await wait_for(pilot, lambda: any("is downloaded" in n for n in notices(app)), timeout=60)
        await wait_for(pilot, lambda: "↓" not in screen_text(app)[0])


async def test_after_cancel_or_delete_the_focus_stays_on_the_quant_and_two_of_one_quant_are_told_apart(
    hub: LocalHub, shelf: Path, gemma_path: Path
) -> None:
    """Issue 37: after Cancel or Delete the focus went to the repository list (Enter then planned the repo
    again); Resume and Delete were reached only by Tab; two files of one quant were two identical rows."""
    from textual.widgets import Button

    hub.add_repo("acme/two-GGUF", {"two-Q4_K_M.gguf": gemma_path, "two-it-Q4_K_M.gguf": gemma_path}, downloads=2000)
    app = make_app(shelf)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_hub(app, pilot)
        await open_repo(pilot, screen, "acme/two-GGUF")
        quants = screen.query_one("#hub-quants", DataTable)
        labels = [str(quants.get_cell(m.ref, "quant")) for m in screen.models]
        assert sorted(labels) == ["Q4_K_M", "Q4_K_M · it"]
        row = labels.index("Q4_K_M · it")

        hub.rate = 10 << 20
        quants.focus()
        quants.move_cursor(row=row)
        await pilot.pause(0.1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.download.last_done > 0)
        cancel = screen.query_one("#download-cancel", Button)
        cancel.focus()  # as Tab reaches it
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.download.stopped is not None)
        await wait_for(pilot, lambda: "Resume" in screen_text(app)[-1])
        assert screen.focused is quants and quants.cursor_row == row
        assert "Delete partial" in screen_text(app)[-1]
        commands = {c.title for c in app.get_system_commands(screen)}
        assert {"Resume the download", "Delete the partial file"} <= commands
        assert "Ctrl+R" in help_text() and "`Delete`" in help_text()

        folder = models_dir() / "acme" / "two-GGUF"
        partial = folder / ".two-it-Q4_K_M.gguf.partial"
        assert partial.exists()
        screen.query_one("#download-discard", Button).focus()
        await pilot.press("enter")  # Delete the partial file, as a button
        await wait_for(pilot, lambda: screen.download.stopped is None)
        await pilot.pause(0.2)
        assert not partial.exists()
        assert screen.focused is quants and quants.cursor_row == row

        await pilot.press("ctrl+d")  # again, stopped by its key, resumed by its key, deleted by its key
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.download.last_done > 0)
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: screen.download.stopped is not None and screen.download.kept > 0)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: screen.download.downloading is not None)
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: screen.download.stopped is not None and screen.download.kept > 0)
        assert partial.exists()
        await pilot.press("delete")
        await wait_for(pilot, lambda: not partial.exists())
        assert screen.focused is quants and quants.cursor_row == row


async def test_a_quant_speed_still_measuring_fills_in_once_the_cpu_is_measured(
    hub: LocalHub, shelf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub's tok/s read "measuring…" for good when the repo was planned while other programs kept the
    CPUs busy: only planning the repo again asked once more. It now asks again once the probe may run
    again, and the figure the model list and --plan would give fills the cell."""
    from tests.support.speed import BusyThenQuiet

    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB/1GiB,bw=500GB/s,ram=32GiB/8GiB")  # a GPU with its bandwidth
    probe = BusyThenQuiet(monkeypatch)
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hub(app, pilot)
        await open_repo(pilot, screen)
        table = screen.query_one("#hub-quants", DataTable)
        index = next(i for i, r in enumerate(screen.rows) if r is not None and r.result is not None)
        ref = screen.rows[index].source.ref

        def cell() -> str:
            return str(table.get_cell(ref, "speed"))

        assert "measuring" in cell()
        probe.quiet()  # the other programs are done
        await wait_for(pilot, lambda: "measuring" not in cell(), timeout=20)
        assert any(ch.isdigit() for ch in cell())
        assert cell() == screen.rows[index].speed_cell


async def test_the_hubs_answers_still_queued_when_the_app_quits_are_dropped(hub: LocalHub, shelf: Path) -> None:
    """Ctrl+Q while the hub answers (a search, its badges, a repo's quants): the answers find the hub view's
    widgets removed, and are dropped rather than ending vramchat on an error."""
    app = make_app(shelf)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_hub(app, pilot)
        await open_repo(pilot, screen)
        request, repos, fits = screen.work.search_request, list(screen.repos), list(screen.fits.values())
        opened, row = screen.work.open_request, screen.rows[0]
    assert not app.is_running and not screen.query("#hub-repos")  # quit: the lists are gone
    assert row is not None
    with app._context():  # as the app's loop would handle them, while it closes
        screen.on_repos_found(ReposFound(request, "", repos))
        screen.on_repo_badged(RepoBadged(request, fits[0]))
        screen.on_quant_planned(QuantPlanned(opened, 0, row))
