"""The hub view: search the Hugging Face hub for GGUF repos, see every quant of one with its exact fit on
this machine, download the one chosen into vramchat's models folder.

The repos are app/tui/widgets/hub_repos.py (each badged with one quant planned for this machine), an opened
repo's quants app/tui/widgets/hub_quants.py (every one planned, the best marked with why), the download
app/tui/widgets/download_panel.py. Every call to the hub runs in a thread worker
(app/tui/screens/hub_controller.py) that posts a message (app/tui/hub_messages.py); an answer to a search or
a repo the user has since left is dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events, getters, on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widgets import DataTable, Header, Input, Static
from textual.worker import Worker, WorkerState

from app.catalog import fit_badge
from app.terminal_text import terminal_safe
from app.tui.hub_messages import QuantPlanned, QuantSpeeds, QuantsPlanned, RepoBadged, RepoListed, ReposFound
from app.tui.screens.dialog_host import DialogHost
from app.tui.screens.hub_controller import HubController
from app.tui.while_running import while_running
from app.tui.widgets.download_panel import DownloadPanel
from app.tui.widgets.footer import AdaptiveFooter
from app.tui.widgets.hub_quants import HubQuants
from app.tui.widgets.hub_repos import HubRepos, found_words
from app.tui.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from collections.abc import Iterator

    from app.quants import QuantRow, RepoFit
    from app.sources.hub import RepoSummary
    from app.sources.model import ModelSource
    from app.tui.services import Services

SEARCH_DEBOUNCE = 0.5  # seconds after the last key before a search starts by itself


class HubScreen(DialogHost):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+f", "search", "Search"),
        Binding("ctrl+d", "download", "Download", show=False),  # Enter on a quant does; F1 and the palette list it
        Binding("ctrl+x", "cancel_download", "Cancel download"),
        Binding("ctrl+r", "resume_download", "Resume"),
        Binding("ctrl+r", "download_again", "Download again"),  # the one of the two that is true shows
        Binding("delete", "discard_partial", "Delete partial"),
        Binding("f5", "ask_again", "Ask the hub again", show=False),  # said where the hub is unreachable
        Binding("f7", "app.hub", "Models"),
        Binding("escape", "back", "Back", show=False),
    ]

    # the panes, typed
    devices_line = getters.query_one("#hub-devices", Static)
    search_box = getters.query_one("#hub-search", Input)
    status_bar = getters.query_one("#hub-bar", StatusBar)
    repo_list = getters.query_one("#hub-repos", HubRepos)
    quants = getters.query_one("#hub-quants", HubQuants)
    best_line = getters.query_one("#hub-best", Static)
    detail = getters.query_one("#hub-detail", Static)

    def __init__(self, services: Services) -> None:
        super().__init__(id="hub")
        self.services = services
        self.work = HubController(self, services)
        self.query_text = ""
        self.repo_id: str | None = None  # the repo opened
        self.planned: str | None = None  # the repo whose every quant is planned (the table complete)
        self.offline = ""  # why the hub cannot be reached ('' when it answered)
        self.landing = False  # opened by a first start: offline, it hands back to the model list
        self.from_cache = ""  # why the opened repo's listing is the one seen before ('' when fresh)
        self._debounce: Timer | None = None
        self.download = DownloadPanel(id="hub-download")  # made here: the footer asks about it before compose
        self._typed_from_list = False  # letters typed in a list go to the search box until it has the focus
        self._left = False  # the view was left (F7), not covered by a dialog: reopened, it asks again if offline
        self._listing_failed = False  # the opened repo's listing did not arrive (asked again with the search)

    # what the lists hold
    @property
    def repos(self) -> list[RepoSummary]:
        return self.repo_list.repos

    @property
    def fits(self) -> dict[str, RepoFit]:
        return self.repo_list.fits

    @property
    def models(self) -> list[ModelSource]:
        return self.quants.models

    @property
    def rows(self) -> list[QuantRow | None]:
        return self.quants.planned

    @property
    def best(self) -> int | None:
        return self.quants.best

    @property
    def downloaded(self) -> dict[str, str]:
        return self.quants.downloaded

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="hub-devices", markup=False)
        yield Input(
            placeholder="Search the hub for GGUF models by name, then Enter",
            id="hub-search",
            compact=True,
            select_on_focus=False,
        )
        yield StatusBar("hub", show_percentage=False)
        yield HubRepos()
        yield HubQuants()
        yield Static("", id="hub-best", markup=False)
        yield Static("", id="hub-detail", markup=False)
        yield self.download
        yield AdaptiveFooter()

    def on_mount(self) -> None:
        self.title = "vramchat"
        self.sub_title = "Hugging Face hub"
        self.status_bar.idle()
        self._lay_out(self.app.size.width)
        self._show_devices()
        self.repo_list.focus()
        self.search("")

    def on_screen_suspend(self) -> None:
        self._left = self not in self.app.screen_stack  # left for another view, not under a dialog

    def on_screen_resume(self) -> None:
        """Back from the model list: the hub asked again if it could not be reached; planned again where the
        devices changed there (RPC servers, memory others took) as the picker's plan cache tells them apart."""
        left, self._left = self._left, False
        if left and self.offline:
            self.action_ask_again()
            return
        if self.work.devices_changed():
            self._show_devices()
            self.search(self.query_text)
            if self.repo_id:
                self.open_repo(self.repo_id)

    def action_ask_again(self) -> None:
        """F5: the search asked again, and the opened repo listed again where its listing came from the cache
        or did not come (the hub could not be reached)."""
        self._show_devices()
        self.search(self.query_text)
        if self.repo_id and (self.from_cache or self._listing_failed):
            self.open_repo(self.repo_id)

    def _show_devices(self) -> None:
        report = self.services.devices
        if report is None:
            self.devices_line.update("Fit badges for this machine (its devices are being probed)")
            return
        from app.devices.render import device_line

        self.devices_line.update(f"Fit badges for {terminal_safe(device_line(report))}")

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out(event.size.width)

    def _lay_out(self, width: int) -> None:
        """Both lists' columns as wide as the terminal allows."""
        self.repo_list.lay_out(width)
        self.quants.lay_out(width)

    # -- searching --------------------------------------------------------------------------------

    def action_search(self) -> None:
        """Ctrl+F: to the search box, its words selected (typing replaces them)."""
        self.search_box.focus()
        self.search_box.select_all()

    def on_key(self, event: events.Key) -> None:
        """Typing in a list starts a new search (the letters go to the search box); Down leaves the box."""
        focused = self.focused
        if isinstance(focused, Input) and event.key == "down":
            event.stop()
            self.repo_list.focus()
            return
        if isinstance(focused, DataTable) and event.is_printable and event.character and event.character != " ":
            box = self.search_box
            # a new search: the words of the last one go (keys typed before the box has the focus follow)
            box.value = box.value + event.character if self._typed_from_list else event.character
            box.cursor_position = len(box.value)
            self._typed_from_list = True
            box.focus()
            event.stop()
            event.prevent_default()

    @on(Input.Changed, "#hub-search")
    def _typed(self, event: Input.Changed) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(SEARCH_DEBOUNCE, lambda: self._search_if_new(event.value))

    @on(Input.Submitted, "#hub-search")
    def _submitted(self, event: Input.Submitted) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._search_if_new(event.value)
        self.repo_list.focus()

    def _search_if_new(self, text: str) -> None:
        if text.strip() != self.query_text:
            self.search(text)

    def search(self, text: str) -> None:
        """Ask the hub for GGUF repos whose name holds `text` (the most downloaded chat repos for '')."""
        self.query_text = text.strip()
        what = (
            f"Searching the hub for {self.query_text!r}"
            if self.query_text
            else "Asking the hub for its most downloaded GGUF chat models"
        )
        self._status(what, busy=True)
        self.work.search(self.query_text)

    @while_running
    def on_repos_found(self, message: ReposFound) -> None:
        if message.request != self.work.search_request:
            return  # an answer to words the user has since changed
        if self.landing:
            self.landing = False
            if message.offline and not message.repos:  # a first start offline: the models here, not an empty hub
                self._show_found(message)  # F7 later shows why, and asks again
                self.app.notify(
                    "The Hugging Face hub cannot be reached, so vramchat opens on the models here. "
                    "F7 opens the hub when this machine is online.",
                    title="Hugging Face hub",
                    timeout=8,
                )
                self.app.pop_screen()
                return
            self.services.settings.hub_on_first_start = False  # landed once: the next start opens the list
            self.services.save_settings()
        self._show_found(message)
        if message.repos:
            self.work.badge([r.repo_id for r in message.repos], message.request)

    def _show_found(self, message: ReposFound) -> None:
        """The repos found (not yet badged), and the line that says what they are or why there are none."""
        self.repo_list.show(message.repos)
        self.offline = message.offline
        words, error = found_words(message.query, len(message.repos), message.offline, message.error)
        self._status(words, error=error)

    @while_running
    def on_repo_badged(self, message: RepoBadged) -> None:
        if message.request != self.work.search_request or not self.repo_list.badge(message.fit):
            return
        table = self.repo_list
        if self.focused is table and table.cursor_row == table.get_row_index(message.fit.repo_id):
            self.detail.update(table.describe(message.fit.repo_id))

    @on(DataTable.RowHighlighted, "#hub-repos")
    def _repo_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.detail.update(self.repo_list.describe(str(event.row_key.value)))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The line under the lists speaks of the list the user is in; on a short terminal only that list
        shows (the repos, or the opened repo's quants)."""
        if event.widget is self.quants:
            self.add_class("-in-repo")
            if self.models:
                self.detail.update(self.quants.describe(self.quants.highlighted()))
        elif event.widget is self.repo_list or event.widget is self.search_box:
            self._typed_from_list = False
            self.remove_class("-in-repo")
            repo_id = self.repo_list.highlighted()
            if repo_id is not None:
                self.detail.update(self.repo_list.describe(repo_id))

    # -- a repo opened: every quant planned -------------------------------------------------------

    @on(DataTable.RowSelected, "#hub-repos")
    def _repo_chosen(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.open_repo(str(event.row_key.value))
            self.add_class("-in-repo")  # shown first: a short terminal shows one list at a time
            self.call_after_refresh(self.quants.focus)

    def open_repo(self, repo_id: str) -> None:
        self.repo_id, self.planned, self.from_cache, self._listing_failed = repo_id, None, "", False
        self.quants.opened(repo_id)
        self.best_line.update("")
        self.detail.update("")
        self._status(f"Listing {repo_id}", busy=True)
        self.work.open(repo_id)

    @while_running
    def on_repo_listed(self, message: RepoListed) -> None:
        if message.request != self.work.open_request:
            return
        if message.listing is None:
            self._listing_failed = True
            self._status(f"✗ {message.error}", error=True)
            self.app.notify(message.error, title=message.title, severity="error", timeout=10)
            return
        listing = message.listing
        commit = f" (commit {listing.commit[:10]})" if listing.commit else ""
        self.quants.listed(f"{listing.repo_id}{commit}", message.models, message.downloaded, self.app.size.width)
        self.from_cache = listing.from_cache
        if not message.models:
            self.planned = listing.repo_id
            self._status(f"{listing.repo_id} holds no GGUF model")
            return
        cached = f" ({listing.from_cache}: the listing seen before)" if listing.from_cache else ""
        self._status(
            f"Planning {len(message.models)} models of {listing.repo_id}{cached}", busy=True, total=len(message.models)
        )

    @while_running
    def on_quant_planned(self, message: QuantPlanned) -> None:
        if message.request != self.work.open_request or message.index >= len(self.rows):
            return
        self.quants.planned_one(message.index, message.row)
        self.status_bar.progressed(sum(r is not None for r in self.rows), len(self.rows))
        if self.quants.highlighted() == message.index:
            self.detail.update(self.quants.describe(message.index))

    @while_running
    def on_quants_planned(self, message: QuantsPlanned) -> None:
        if message.request != self.work.open_request:
            return
        self.planned = self.repo_id
        self.quants.planned_all(message.table, self.app.size.width)
        self.best_line.update(self.quants.best_words())
        name = self.repo_id or ""
        planned = sum(1 for r in self.rows if r is not None and r.result is not None)
        cached = f" from the cache ({self.from_cache})" if self.from_cache else ""
        self._status(f"{name}: {planned} of {len(self.rows)} models planned{cached}; Enter downloads one")
        self.detail.update(self.quants.describe(self.quants.highlighted()))
        self.work.watch_speeds(self.quants.measuring)

    @while_running
    def on_quant_speeds(self, message: QuantSpeeds) -> None:
        if message.request != self.work.open_request:
            return
        self.quants.timed(message.speeds)
        highlighted = self.quants.highlighted()
        if highlighted in message.speeds:
            self.detail.update(self.quants.describe(highlighted))
        self.work.watch_speeds(self.quants.measuring)

    @on(DataTable.RowHighlighted, "#hub-quants")
    def _quant_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.detail.update(self.quants.describe(event.cursor_row))

    # -- downloading: app/tui/widgets/download_panel.py ------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.download.allows(action)

    @on(DataTable.RowSelected, "#hub-quants")
    def _quant_chosen(self) -> None:
        self.action_download()

    def action_download(self) -> None:
        """Enter on a quant, or Ctrl+D: download it (and its projector), after checking the room and asking."""
        index = self.quants.highlighted()
        if index is None or self.quants.region.height == 0:
            self.app.notify("Open a repository (Enter on it) and choose a quant first.", severity="warning")
            return
        source = self.models[index]
        if source.problem:
            self.app.notify(f"{source.file_name}: {source.problem}", title="Cannot download", severity="error")
            return
        row = self.rows[index] if index < len(self.rows) else None
        self.download.request(source, fit_badge(row.summary)[0] if row is not None else "")

    def palette_commands(self) -> Iterator[SystemCommand]:
        """The view's actions in the command palette: those that can be done now."""
        yield SystemCommand("Search the hub", "GGUF repos by name (Ctrl+F)", self.action_search)
        yield SystemCommand("Ask the hub again", "After it could not be reached (F5)", self.action_ask_again)
        yield SystemCommand("Download the selected quant", "And its projector (Ctrl+D)", self.action_download)
        yield from self.download.palette_commands()

    def action_cancel_download(self) -> None:
        self.download.cancel()

    def action_resume_download(self) -> None:
        """Ctrl+R: the stopped download goes on from what arrived."""
        self.download.resume()

    def action_download_again(self) -> None:
        """Ctrl+R where nothing of the stopped download is kept (a failed checksum): it starts over."""
        self.download.resume()

    def action_discard_partial(self) -> None:
        """Delete: what arrived of the stopped download is removed."""
        self.download.discard()

    def on_download_panel_buttons_gone(self) -> None:
        """A button pressed went away with its state: the focus back on the quant it was about, not the repos."""
        (self.quants if self.models else self.repo_list).focus()

    def stop_download(self) -> None:
        """The app is quitting: a download running stops, its partial file kept to resume."""
        self.download.stop()

    def on_download_panel_finished(self, message: DownloadPanel.Finished) -> None:
        self.quants.mark_downloaded(message.source.ref, message.path)

    # -- the rest ---------------------------------------------------------------------------------

    async def action_back(self) -> None:
        """Esc: from the quants to the repos, from there back to the model list."""
        if self.focused is self.quants:
            self.remove_class("-in-repo")
            self.call_after_refresh(self.repo_list.focus)
        else:
            await self.run_action("app.hub")

    def _status(self, text: str, busy: bool = False, error: bool = False, total: int | None = None) -> None:
        self.status_bar.say(Text(terminal_safe(text), style=f"bold {self.app.current_theme.error}" if error else ""))
        if busy:
            self.status_bar.working(total)
        else:
            self.status_bar.idle()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        if event.worker.group in ("hub-search", "hub-open"):
            self._status("✗ The hub view stopped on an unexpected error (see the notification).", error=True)
        self.services.report_worker_error(event.worker)
