"""The hub view: search the Hugging Face hub for GGUF repos, see every quant of one with its exact fit on
this machine, download the one chosen into vramchat's models folder.

Every call to the hub (search, a repo's listing, the headers) runs in a thread worker that posts a
message (app/tui/hub_messages.py); an answer to a search or a repo the user has since left is dropped,
and a worker no longer wanted stops waiting for the network (app/tui/abandon.py). Repos are badged with
one quant each (their Q4_K_M, or the nearest), planned from its header as the picker plans; an opened
repo has every quant planned, the best marked with why. The download is app/tui/widgets/download_panel.py.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Header, Input, Label, ProgressBar, Static
from textual.worker import Worker, WorkerState, get_current_worker

from app.catalog import fit_badge
from app.errors import VramchatError
from app.terminal_text import terminal_safe
from app.tui.abandon import POLL, Abandoned, call_abandonable
from app.tui.badges import badge_style
from app.tui.hub_messages import (
    QuantPlanned,
    QuantSpeeds,
    QuantsPlanned,
    RepoBadged,
    RepoListed,
    ReposFound,
)
from app.tui.widgets.download_panel import DownloadPanel
from app.tui.widgets.footer import AdaptiveFooter
from planner.units import format_size

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from app.devices import DeviceReport
    from app.planning import Planned
    from app.quants import QuantRow, RepoFit
    from app.sources.hub import RepoSummary
    from app.sources.model import ModelSource
    from app.tui.services import Services
    from planner.model import ModelAnatomy

SEARCH_LIMIT = 20  # repos a search or the most downloaded list shows (each is badged: a header read)
BADGE_PARALLEL = 4  # repos badged at once
SEARCH_DEBOUNCE = 0.5  # seconds after the last key before a search starts by itself

# (key, label, width, shown from this table width on); a width of 0 takes what is left
REPO_COLUMNS: tuple[tuple[str, str, int, int], ...] = (
    ("name", "Repository", 0, 0),
    ("quant", "Quant", 10, 0),
    ("fit", "Fit on this machine", 36, 0),
    ("downloads", "Downloads", 9, 100),
    ("likes", "Likes", 6, 150),
)
REPO_NAME_MIN, REPO_NAME_MAX = 16, 60
# the quants: these always, then the others while they fit, in this order
QUANT_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("mark", "", 2),
    ("quant", "Quant", 0),  # as wide as the longest quant's label
    ("size", "Size", 10),
    ("fit", "Fit on this machine", 36),
)
QUANT_OPTIONAL: tuple[tuple[str, str, int], ...] = (
    # the speed first: the figure people pick a quant by (at 80 columns it has the room the context had)
    ("speed", "tok/s", 10),  # once the speed model gives a figure (or is measuring this CPU)
    ("ctx", "Context", 9),
    ("layers", "GPU layers", 10),
    ("kv", "KV", 9),
)
FIT_MIN = 24  # the fit column's least width ("Fit on this machine" and a short badge)
BEST, ON_DISK = "★", "✓"


def format_count(n: int) -> str:
    """A download count as the hub shows it: 950, 12.3k, 4.5M."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size:
            value = n / size
            return f"{value:.1f}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return str(n)


def _planner(report: DeviceReport) -> Callable[[ModelSource, ModelAnatomy], Planned]:
    """A remote model planned as the picker plans a local one: this machine's devices, no knob set."""
    from app.planning import PlanChoice, plan_source

    def plan(source: ModelSource, anatomy: ModelAnatomy) -> Planned:
        return plan_source(source, report, PlanChoice(), anatomy=anatomy)

    return plan


class HubScreen(Screen):
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

    def __init__(self, services: Services) -> None:
        super().__init__(id="hub")
        self.services = services
        self.query_text = ""
        self.repos: list[RepoSummary] = []
        self.fits: dict[str, RepoFit] = {}
        self.repo_id: str | None = None  # the repo opened
        self.planned: str | None = None  # the repo whose every quant is planned (the table complete)
        self.models: list[ModelSource] = []
        self.rows: list[QuantRow | None] = []  # its quants, planned as they come
        self.best: int | None = None
        self.why = ""
        self.downloaded: dict[str, str] = {}  # a model's ref -> where it is on this machine
        self.offline = ""  # why the hub cannot be reached ('' when it answered)
        self.landing = False  # opened by a first start: offline, it hands back to the model list
        self.from_cache = ""  # why the opened repo's listing is the one seen before ('' when fresh)
        self._search_request = 0
        self._open_request = 0
        self._report: DeviceReport | None = None  # the devices the badges were planned for
        self._debounce: Timer | None = None
        self._repo_layout: tuple[tuple[str, str, int], ...] = ()
        self._quant_layout: tuple[tuple[str, str, int], ...] = ()
        self.download = DownloadPanel(id="hub-download")  # made here: the footer asks about it before compose
        self._typed_from_list = False  # letters typed in a list go to the search box until it has the focus
        self._left = False  # the view was left (F7), not covered by a dialog: reopened, it asks again if offline
        self._listing_failed = False  # the opened repo's listing did not arrive (asked again with the search)
        self._speed_timer: Timer | None = None  # asks the speed again while a figure reads "measuring…"

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="hub-devices", markup=False)
        yield Input(
            placeholder="Search the hub for GGUF models by name, then Enter",
            id="hub-search",
            compact=True,
            select_on_focus=False,
        )
        with Horizontal(id="hub-bar"):
            yield Label("", id="hub-status", markup=False)
            yield ProgressBar(id="hub-progress", show_eta=False, show_percentage=False)
        repos: DataTable[object] = DataTable(id="hub-repos", cursor_type="row", zebra_stripes=True)
        repos.border_title = "Repositories"
        yield repos
        quants: DataTable[object] = DataTable(id="hub-quants", cursor_type="row", zebra_stripes=True)
        quants.border_title = "Quants"
        quants.border_subtitle = "Enter downloads · Esc back"
        yield quants
        yield Static("", id="hub-best", markup=False)
        yield Static("", id="hub-detail", markup=False)
        yield self.download
        yield AdaptiveFooter()

    def on_mount(self) -> None:
        self.title = "vramchat"
        self.sub_title = "Hugging Face hub"
        self.query_one("#hub-progress").display = False
        self._lay_out(self.app.size.width)
        self._show_devices()
        self.query_one("#hub-repos", DataTable).focus()
        self.search("")

    def on_screen_suspend(self) -> None:
        self._left = self not in self.app.screen_stack  # left for another view, not under a dialog

    def on_screen_resume(self) -> None:
        """Back from the model list: the hub asked again if it could not be reached; planned again where the
        devices changed there (RPC servers, memory others took) as the picker's plan cache tells them apart."""
        from app.caches.plans import device_fingerprint

        left, self._left = self._left, False
        if left and self.offline:
            self.action_ask_again()
            return
        now, then = self.services.devices, self._report
        if now is None or then is None:
            return
        if device_fingerprint(now.gpus, now.host) != device_fingerprint(then.gpus, then.host):
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
        line = self.query_one("#hub-devices", Static)
        if report is None:
            line.update("Fit badges for this machine (its devices are being probed)")
            return
        from app.devices.render import device_line

        line.update(f"Fit badges for {terminal_safe(device_line(report))}")

    def _devices(self) -> DeviceReport:
        """The devices to plan for (in a worker): the picker's probe, or a probe of our own before it."""
        report = self.services.devices or self.services.probe_devices()
        self._report = report
        return report

    # -- columns as wide as the terminal allows -------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out(event.size.width)

    def _lay_out(self, width: int) -> None:
        room = width - 4  # a table's borders and its scrollbar
        shown = [c for c in REPO_COLUMNS if width >= c[3]]
        free = room - 2 * len(shown) - sum(c[2] for c in shown)
        name = max(REPO_NAME_MIN, min(REPO_NAME_MAX, free))
        repo_layout = tuple((key, label, w or name) for key, label, w, _ in shown)
        if repo_layout != self._repo_layout:
            self._repo_layout = repo_layout
            self._fill_repos()
        quant_width = max([len(label) for label in self._labels()] + [8])
        columns = [(key, label, w or quant_width) for key, label, w in QUANT_COLUMNS]
        if width < 120:  # the fit column as wide as its widest badge, for the speed beside it
            fit = max([FIT_MIN] + [len(self._fit_badge(i)[0]) for i in range(len(self.models))])
            columns = [(key, label, min(w, fit) if key == "fit" else w) for key, label, w in columns]
        free = room - sum(w + 2 for _, _, w in columns)
        with_speed = any(r is not None and r.speed_cell not in ("-", "?") for r in self.rows)
        for key, label, w in QUANT_OPTIONAL:
            if key == "speed" and not with_speed:
                continue
            if free >= w + 2:
                columns.append((key, label, w))
                free -= w + 2
        quant_layout = tuple(columns)
        if quant_layout != self._quant_layout:
            self._quant_layout = quant_layout
            self._fill_quants()

    # -- searching --------------------------------------------------------------------------------

    def action_search(self) -> None:
        """Ctrl+F: to the search box, its words selected (typing replaces them)."""
        box = self.query_one("#hub-search", Input)
        box.focus()
        box.select_all()

    def on_key(self, event: events.Key) -> None:
        """Typing in a list starts a new search (the letters go to the search box); Down leaves the box."""
        focused = self.focused
        if isinstance(focused, Input) and event.key == "down":
            event.stop()
            self.query_one("#hub-repos", DataTable).focus()
            return
        if isinstance(focused, DataTable) and event.is_printable and event.character and event.character != " ":
            box = self.query_one("#hub-search", Input)
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
        self.query_one("#hub-repos", DataTable).focus()

    def _search_if_new(self, text: str) -> None:
        if text.strip() != self.query_text:
            self.search(text)

    def search(self, text: str) -> None:
        """Ask the hub for GGUF repos whose name holds `text` (the most downloaded chat repos for '')."""
        self.query_text = text.strip()
        self._search_request += 1
        what = (
            f"Searching the hub for {self.query_text!r}"
            if self.query_text
            else "Asking the hub for its most downloaded GGUF chat models"
        )
        self._status(what, busy=True)
        self._search(self.query_text, self._search_request)

    @work(thread=True, exclusive=True, group="hub-search", exit_on_error=False)
    def _search(self, text: str, request: int) -> None:
        from app.sources import hub
        from app.sources.errors import SourceError, Unreachable

        try:
            if text:
                repos = call_abandonable(hub.search_repos, text, SEARCH_LIMIT)
            else:
                repos = call_abandonable(hub.popular_chat_repos, SEARCH_LIMIT)
        except Abandoned:
            return
        except Unreachable as exc:
            self.post_message(ReposFound(request, text, hub.seen_repos(text, SEARCH_LIMIT), offline=str(exc)))
            return
        except SourceError as exc:
            self.post_message(ReposFound(request, text, [], error=str(exc)))
            return
        self.post_message(ReposFound(request, text, repos))

    def on_repos_found(self, message: ReposFound) -> None:
        if message.request != self._search_request:
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
            self._badge([r.repo_id for r in message.repos], message.request)

    def _show_found(self, message: ReposFound) -> None:
        """The repos found (not yet badged), and the line that says what they are or why there are none."""
        self.repos = message.repos
        self.fits = {}
        self.offline = message.offline
        self._fill_repos()
        what = repr(message.query)
        if message.error:
            self._status(f"✗ {message.error}", error=True)
        elif message.offline:
            seen = f"{len(message.repos)} repo{'s' if len(message.repos) != 1 else ''} seen before"
            found = f"{seen}, from the cache" if message.repos else "No repo seen before matches"
            self._status(
                f"The hub cannot be reached: {_sentence(message.offline)} {found}. "
                "F5 asks again (and so does coming back with F7).",
                error=True,
            )
        elif not message.repos:
            self._status(
                f"No GGUF repo on the hub matches {what}" if message.query else "The hub lists no GGUF chat repo"
            )
        elif message.query:
            count = len(message.repos)
            match = f"{count} GGUF repo matches" if count == 1 else f"{count} GGUF repos match"
            self._status(f"{match} {what}, the most downloaded first; Enter opens one")
        else:
            self._status("The hub's most downloaded GGUF chat models; Enter opens one, or type to search")

    @work(thread=True, exclusive=True, group="hub-badges", exit_on_error=False)
    def _badge(self, repo_ids: list[str], request: int) -> None:
        """Badge each repo with one quant planned for this machine, a few at a time."""
        from app.quants import RepoFit, repo_fit
        from app.sources import load_anatomy

        worker = get_current_worker()
        plan = _planner(self._devices())
        todo: queue.SimpleQueue[str] = queue.SimpleQueue()
        for repo_id in repo_ids:
            todo.put(repo_id)
        left = [len(repo_ids)]
        lock, finished = threading.Lock(), threading.Event()

        def stale() -> bool:
            return worker.is_cancelled or request != self._search_request

        def badge_some() -> None:  # in a daemon thread: a stale search or quitting does not wait for it
            while not stale():
                try:
                    repo_id = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    fit = repo_fit(repo_id, load_anatomy, plan)
                except Exception as exc:  # a hostile header must not take the list down: that repo says why
                    fit = RepoFit(repo_id, problem="unreadable", error=f"{type(exc).__name__}: {exc}")
                if not stale():
                    self.post_message(RepoBadged(request, fit))
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        finished.set()

        for _ in range(min(BADGE_PARALLEL, len(repo_ids))):
            threading.Thread(target=badge_some, name="hub-badge", daemon=True).start()
        while not finished.wait(POLL) and not stale():
            pass

    def on_repo_badged(self, message: RepoBadged) -> None:
        if message.request != self._search_request:
            return
        fit = message.fit
        self.fits[fit.repo_id] = fit
        table = self.query_one("#hub-repos", DataTable)
        if fit.repo_id not in table.rows:
            return
        cells = self._repo_cells(fit.repo_id)
        for key, _, _ in self._repo_layout:
            table.update_cell(fit.repo_id, key, cells[key])
        if self.focused is table and table.cursor_row == table.get_row_index(fit.repo_id):
            self._show_repo(fit.repo_id)

    def _fill_repos(self) -> None:
        table = self.query_one("#hub-repos", DataTable)
        if not self._repo_layout:
            return
        at = table.cursor_row
        table.clear(columns=True)
        for key, label, width in self._repo_layout:
            table.add_column(label, key=key, width=width)
        for repo in self.repos:
            cells = self._repo_cells(repo.repo_id)
            name = cells["name"]
            height = len(name.plain.splitlines()) if isinstance(name, Text) else 1
            table.add_row(*[cells[key] for key, _, _ in self._repo_layout], key=repo.repo_id, height=height)
        if self.repos:
            table.move_cursor(row=min(at, len(self.repos) - 1))

    def _name_width(self) -> int:
        return next((w for key, _, w in self._repo_layout if key == "name"), REPO_NAME_MIN)

    def _repo_cells(self, repo_id: str) -> dict[str, object]:
        repo = next((r for r in self.repos if r.repo_id == repo_id), None)
        fit = self.fits.get(repo_id)
        if fit is None:
            badge, kind = "planning…", "pending"
        elif fit.summary is not None and not fit.summary.error:
            badge, kind = fit_badge(fit.summary)
        else:
            badge, kind = (fit.problem or "unreadable"), "error"
        name = _wrapped(repo_id, self._name_width())
        downloads = format_count(repo.downloads) if repo is not None and repo.downloads else "-"
        return {
            "name": name,
            "quant": terminal_safe(fit.quant if fit else "") or "-",
            "fit": Text(badge, style=badge_style(kind, self.app.current_theme)),
            "downloads": Text(downloads, justify="right"),
            "likes": Text(format_count(repo.likes) if repo and repo.likes else "-", justify="right"),
        }

    @on(DataTable.RowHighlighted, "#hub-repos")
    def _repo_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show_repo(str(event.row_key.value))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The line under the lists speaks of the list the user is in; on a short terminal only that list
        shows (the repos, or the opened repo's quants)."""
        if event.widget is self.query_one("#hub-quants"):
            self.add_class("-in-repo")
            if self.models:
                self._show_detail(self._highlighted_index())
        elif event.widget is self.query_one("#hub-repos") or event.widget is self.query_one("#hub-search"):
            self._typed_from_list = False
            self.remove_class("-in-repo")
            if self.repos:
                table = self.query_one("#hub-repos", DataTable)
                self._show_repo(self.repos[min(max(table.cursor_row, 0), len(self.repos) - 1)].repo_id)

    def _show_repo(self, repo_id: str) -> None:
        """What the highlighted repo's badge stands for, or why it has none."""
        fit = self.fits.get(repo_id)
        if fit is None:
            text = f"{repo_id}: being planned for this machine (one quant's header is read)"
        elif fit.error:
            text = f"{repo_id}: {fit.error}"
        else:
            count = f"{fit.models} GGUF model{'s' if fit.models != 1 else ''}"
            text = f"{repo_id}: {count}; the badge is its {fit.quant}'s. Enter plans every quant."
        self.query_one("#hub-detail", Static).update(terminal_safe(text))

    # -- a repo opened: every quant planned -------------------------------------------------------

    @on(DataTable.RowSelected, "#hub-repos")
    def _repo_chosen(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.open_repo(str(event.row_key.value))
            self.add_class("-in-repo")  # shown first: a short terminal shows one list at a time
            self.call_after_refresh(self.query_one("#hub-quants", DataTable).focus)

    def open_repo(self, repo_id: str) -> None:
        self.repo_id, self.planned, self.from_cache, self._listing_failed = repo_id, None, "", False
        self._open_request += 1
        self.models, self.rows, self.best, self.why, self.downloaded = [], [], None, "", {}
        self.query_one("#hub-quants", DataTable).border_title = repo_id
        self.query_one("#hub-best", Static).update("")
        self.query_one("#hub-detail", Static).update("")
        self._fill_quants()
        self._status(f"Listing {repo_id}", busy=True)
        self._open(repo_id, self._open_request)

    @work(thread=True, exclusive=True, group="hub-open", exit_on_error=False)
    def _open(self, repo_id: str, request: int) -> None:
        from app.quants import plan_quants
        from app.sources import hub, load_anatomy

        try:
            listing = call_abandonable(hub.list_repo, repo_id)
        except Abandoned:
            return
        except VramchatError as exc:
            self.post_message(RepoListed(request, None, [], {}, str(exc), exc.title))
            return
        models = hub.repo_models(listing)
        self.post_message(RepoListed(request, listing, models, _on_this_machine(models)))
        if not models:
            return
        worker = get_current_worker()
        plan = _planner(self._devices())

        def planned(index: int, row: QuantRow) -> None:
            if worker.is_cancelled or request != self._open_request:
                raise _Stale
            self.post_message(QuantPlanned(request, index, row))

        try:
            table = call_abandonable(plan_quants, models, load_anatomy, plan, on_row=planned)
        except (Abandoned, _Stale):
            return
        self.post_message(QuantsPlanned(request, table))

    def on_repo_listed(self, message: RepoListed) -> None:
        if message.request != self._open_request:
            return
        if message.listing is None:
            self._listing_failed = True
            self._status(f"✗ {message.error}", error=True)
            self.app.notify(message.error, title=message.title, severity="error", timeout=10)
            return
        self.models = message.models
        self.rows = [None] * len(message.models)
        self.downloaded = message.downloaded
        self._quant_layout = ()
        self._lay_out(self.app.size.width)
        listing = message.listing
        commit = f" (commit {listing.commit[:10]})" if listing.commit else ""
        self.query_one("#hub-quants", DataTable).border_title = f"{listing.repo_id}{commit}"
        self.from_cache = listing.from_cache
        if not message.models:
            self.planned = listing.repo_id
            self._status(f"{listing.repo_id} holds no GGUF model")
            return
        cached = f" ({listing.from_cache}: the listing seen before)" if listing.from_cache else ""
        self._status(
            f"Planning {len(message.models)} models of {listing.repo_id}{cached}", busy=True, total=len(message.models)
        )

    def on_quant_planned(self, message: QuantPlanned) -> None:
        if message.request != self._open_request or message.index >= len(self.rows):
            return
        self.rows[message.index] = message.row
        done = sum(r is not None for r in self.rows)
        self.query_one("#hub-progress", ProgressBar).update(total=len(self.rows), progress=done)
        table = self.query_one("#hub-quants", DataTable)
        key = message.row.source.ref
        if key in table.rows:
            cells = self._quant_cells(message.index)
            for column, _, _ in self._quant_layout:
                table.update_cell(key, column, cells[column])
        if self._highlighted_index() == message.index:
            self._show_detail(message.index)

    def on_quants_planned(self, message: QuantsPlanned) -> None:
        if message.request != self._open_request:
            return
        table = message.table
        self.rows = list(table.rows)
        self.planned = self.repo_id
        self.best, self.why = table.best, table.why
        self._quant_layout = ()
        self._lay_out(self.app.size.width)  # the speed column comes with the first figure
        quants = self.query_one("#hub-quants", DataTable)
        if self.best is not None and quants.cursor_row == 0:
            quants.move_cursor(row=self.best)
        best = self.query_one("#hub-best", Static)
        if self.best is not None:
            best.update(Text.assemble((f"{BEST} Best here: {self._labels()[self.best]}", "bold"), f": {self.why}"))
        else:
            best.update(Text(f"✗ {self.why}", style="bold"))
        name = self.repo_id or ""
        planned = sum(1 for r in self.rows if r is not None and r.result is not None)
        cached = f" from the cache ({self.from_cache})" if self.from_cache else ""
        self._status(f"{name}: {planned} of {len(self.rows)} models planned{cached}; Enter downloads one")
        self._show_detail(self._highlighted_index())
        self._watch_speeds()

    # -- a speed still being measured -------------------------------------------------------------

    def _measuring(self) -> dict[int, QuantRow]:
        """The planned rows whose speed reads "measuring…" (this CPU's probe was disturbed)."""
        from planner.speed import PENDING

        return {
            i: r
            for i, r in enumerate(self.rows)
            if r is not None and r.result is not None and r.speed is not None and r.speed.decode_start.basis == PENDING
        }

    def _watch_speeds(self) -> None:
        """Ask again once the probe may run again (app.speed.machine.RETRY_SECONDS), while a figure waits."""
        if self._speed_timer is not None:
            self._speed_timer.stop()
            self._speed_timer = None
        if self._measuring():
            from app.speed.machine import RETRY_SECONDS

            request = self._open_request
            self._speed_timer = self.set_timer(RETRY_SECONDS + 1, lambda: self._ask_speeds(request))

    @work(thread=True, exclusive=True, group="hub-speeds", exit_on_error=False)
    def _ask_speeds(self, request: int) -> None:
        from app.speed import plan_speed

        rows = self._measuring()
        if not rows or request != self._open_request:
            return
        gpus = self._devices().gpus
        speeds = {i: plan_speed(r.result.plan, gpus) for i, r in rows.items() if r.result is not None}
        self.post_message(QuantSpeeds(request, speeds))

    def on_quant_speeds(self, message: QuantSpeeds) -> None:
        if message.request != self._open_request:
            return
        table = self.query_one("#hub-quants", DataTable)
        for index, speed in message.speeds.items():
            row = self.rows[index] if index < len(self.rows) else None
            if row is None:
                continue
            row.speed = speed
            if row.source.ref in table.rows and any(c == "speed" for c, _, _ in self._quant_layout):  # (a narrow
                # table may leave the column out: the detail line below still says the figure)
                table.update_cell(row.source.ref, "speed", self._quant_cells(index)["speed"])
        highlighted = self._highlighted_index()
        if highlighted in message.speeds:
            self._show_detail(highlighted)
        self._watch_speeds()

    def _fill_quants(self) -> None:
        table = self.query_one("#hub-quants", DataTable)
        if not self._quant_layout:
            return
        at = table.cursor_row
        table.clear(columns=True)
        for key, label, width in self._quant_layout:
            table.add_column(label, key=key, width=width)
        for index, model in enumerate(self.models):
            cells = self._quant_cells(index)
            table.add_row(*[cells[key] for key, _, _ in self._quant_layout], key=model.ref)
        if self.models:
            table.move_cursor(row=min(at, len(self.models) - 1))

    def _labels(self) -> list[str]:
        """Each quant's label, those of one quant told apart by what differs in their file names."""
        from app.tui.quant_labels import distinct_labels

        rows = [self.rows[i] if i < len(self.rows) else None for i in range(len(self.models))]
        labels = [row.label if row is not None else _label(model) for model, row in zip(self.models, rows, strict=True)]
        distinct = distinct_labels(labels, [m.files[0].name if m.files else m.ref for m in self.models])
        return [terminal_safe(label) for label in distinct]  # file names from the hub

    def _fit_badge(self, index: int) -> tuple[str, str]:
        row = self.rows[index] if index < len(self.rows) else None
        return ("planning…", "pending") if row is None else fit_badge(row.summary)

    def _quant_cells(self, index: int) -> dict[str, object]:
        model = self.models[index]
        row = self.rows[index] if index < len(self.rows) else None
        mark = (BEST if index == self.best else " ") + (ON_DISK if model.ref in self.downloaded else "")
        label = self._labels()[index]
        badge, kind = self._fit_badge(index)
        cells: dict[str, object] = {
            "mark": Text(mark, style="bold"),
            "quant": Text(label, style="bold" if index == self.best else ""),
            "size": Text(format_size(model.size), justify="right"),
            "fit": Text(badge, style=badge_style(kind, self.app.current_theme)),
            "ctx": "-",
            "speed": "-",
            "layers": "-",
            "kv": "-",
        }
        if row is not None and row.result is not None:
            plan = row.result.plan
            kv = plan.resolved.type_k.name
            if plan.resolved.type_v.name != kv:
                kv += f"/{plan.resolved.type_v.name}"
            cells["ctx"] = Text(f"{plan.resolved.n_ctx:,}", justify="right")
            cells["layers"] = f"{plan.layers_on_gpu}/{plan.model.n_layer + 1}" if plan.gpus else "0 (CPU)"
            cells["kv"] = kv
            cells["speed"] = Text(row.speed_cell, justify="right")
        return cells

    @on(DataTable.RowHighlighted, "#hub-quants")
    def _quant_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(event.cursor_row)

    def _highlighted_index(self) -> int | None:
        table = self.query_one("#hub-quants", DataTable)
        if not self.models or table.row_count == 0:
            return None
        return min(max(table.cursor_row, 0), len(self.models) - 1)

    def _show_detail(self, index: int | None) -> None:
        detail = self.query_one("#hub-detail", Static)
        if index is None or index >= len(self.models):
            detail.update("")
            return
        from app.sources.download import choose_projector

        model = self.models[index]
        parts = [f"{model.file_name}, {format_size(model.size)}"]
        if len(model.files) > 1:
            parts[0] += f" in {len(model.files)} files"
        projector = choose_projector(model)
        if projector is not None:
            parts.append(f"with {projector.file_name} ({format_size(projector.size)})")
        if model.ref in self.downloaded:
            parts.append(f"{ON_DISK} on this machine")
        row = self.rows[index] if index < len(self.rows) else None
        if row is not None and row.result is not None:
            from planner.explain import headline

            parts.append(headline(row.result.plan))
        elif row is not None and row.error:
            parts.append(f"✗ {row.error}")
        detail.update(terminal_safe(" · ".join(parts)))

    # -- downloading: app/tui/widgets/download_panel.py ------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_download":
            return self.download.downloading is not None
        stopped = self.download.stopped is not None and self.download.downloading is None
        if action in ("resume_download", "discard_partial"):
            return stopped and self.download.kept > 0
        if action == "download_again":
            return stopped and self.download.kept == 0
        return True

    @on(DataTable.RowSelected, "#hub-quants")
    def _quant_chosen(self) -> None:
        self.action_download()

    def action_download(self) -> None:
        """Enter on a quant, or Ctrl+D: download it (and its projector), after checking the room and asking."""
        index = self._highlighted_index()
        if index is None or self.query_one("#hub-quants").region.height == 0:
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
        if self.check_action("cancel_download", ()):
            yield SystemCommand(
                "Cancel the download", "What arrived is kept to resume (Ctrl+X)", self.action_cancel_download
            )
        if self.check_action("resume_download", ()):
            yield SystemCommand("Resume the download", "From what arrived before (Ctrl+R)", self.action_resume_download)
            yield SystemCommand(
                "Delete the partial file", "What arrived of the stopped download (Delete)", self.action_discard_partial
            )
        if self.check_action("download_again", ()):
            yield SystemCommand(
                "Download again", "The stopped download, from the start (Ctrl+R)", self.action_download_again
            )

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
        table = self.query_one("#hub-quants", DataTable)
        (table if self.models else self.query_one("#hub-repos", DataTable)).focus()

    def stop_download(self) -> None:
        """The app is quitting: a download running stops, its partial file kept to resume."""
        self.download.stop()

    def on_download_panel_finished(self, message: DownloadPanel.Finished) -> None:
        self.downloaded[message.source.ref] = message.path
        if any(m.ref == message.source.ref for m in self.models):
            self._fill_quants()  # its ✓

    # -- the rest ---------------------------------------------------------------------------------

    async def action_back(self) -> None:
        """Esc: from the quants to the repos, from there back to the model list."""
        if self.focused is self.query_one("#hub-quants"):
            self.remove_class("-in-repo")
            self.call_after_refresh(self.query_one("#hub-repos", DataTable).focus)
        else:
            await self.run_action("app.hub")

    def _status(self, text: str, busy: bool = False, error: bool = False, total: int | None = None) -> None:
        label = self.query_one("#hub-status", Label)
        label.update(Text(terminal_safe(text), style=f"bold {self.app.current_theme.error}" if error else ""))
        bar = self.query_one("#hub-progress", ProgressBar)
        bar.display = busy
        if busy:
            bar.update(total=total, progress=0)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        if event.worker.group in ("hub-search", "hub-open"):
            self._status("✗ The hub view stopped on an unexpected error (see the notification).", error=True)
        self.services.report_worker_error(event.worker)


def _label(model: ModelSource) -> str:
    """A quant's label before its header is read: its quant (or its file's name), how many files it is."""
    quant = terminal_safe(model.quant or model.file_name)
    return f"{quant} ({len(model.files)} files)" if len(model.files) > 1 else quant


def _sentence(text: str) -> str:
    """`text` ending as a sentence does (one full stop, not one after a question mark)."""
    text = text.rstrip()
    return text if text.endswith((".", "?", "!")) else f"{text}."


def _wrapped(repo_id: str, width: int) -> Text:
    """The repo's name whole, in as many lines as its column needs: ORG/ above NAME where it is too long."""
    repo_id = terminal_safe(repo_id)
    if len(repo_id) <= width:
        return Text(repo_id)
    org, _, name = repo_id.partition("/")
    lines: list[str] = []
    for part in (f"{org}/", name):
        lines += [part[i : i + width] for i in range(0, len(part), width)] or [""]
    return Text("\n".join(lines))


class _Stale(Exception):
    """The repo being planned is no longer the one shown."""


def _on_this_machine(models: list[ModelSource]) -> dict[str, str]:
    """Which of the models are whole on this machine already (the models folder, the Hugging Face cache)."""
    from app.sources.download import plan_download

    found = {}
    for model in models:
        try:
            plan = plan_download(model, with_projector=False)
        except VramchatError:
            continue
        if not plan.files:
            found[model.ref] = str(plan.model_path)
    return found
