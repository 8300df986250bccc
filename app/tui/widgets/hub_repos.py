"""The hub view's repositories: a search's answer (or the most downloaded GGUF chat repos), each badged with
one quant planned for this machine (its Q4_K_M, or the nearest) as the badges arrive; columns as wide as
the terminal allows, a long name wrapped whole."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import DataTable

from app.catalog import fit_badge
from app.terminal_text import terminal_safe
from app.tui.badges import badge_style
from app.tui.widgets.table_columns import Column, columns_at, redraw

if TYPE_CHECKING:
    from app.quants import RepoFit
    from app.sources.hub import RepoSummary

# (key, label, width, shown from this table width on); a width of 0 takes what is left
REPO_COLUMNS: tuple[tuple[str, str, int, int], ...] = (
    ("name", "Repository", 0, 0),
    ("quant", "Quant", 10, 0),
    ("fit", "Fit on this machine", 36, 0),
    ("downloads", "Downloads", 9, 100),
    ("likes", "Likes", 6, 150),
)
REPO_NAME_MIN, REPO_NAME_MAX = 16, 60


class HubRepos(DataTable[object]):
    def __init__(self) -> None:
        super().__init__(id="hub-repos", cursor_type="row", zebra_stripes=True)
        self.border_title = "Repositories"
        self.repos: list[RepoSummary] = []
        self.fits: dict[str, RepoFit] = {}  # the badges arrived, by repo
        self._columns_shown: tuple[Column, ...] = ()

    def lay_out(self, width: int) -> None:
        """The columns that fit a terminal `width` wide; the rows drawn again where they change."""
        layout = columns_at(width, REPO_COLUMNS, REPO_NAME_MIN, REPO_NAME_MAX)
        if layout != self._columns_shown:
            self._columns_shown = layout
            self.fill()

    def show(self, repos: list[RepoSummary]) -> None:
        """The repos of a new answer, not yet badged."""
        self.repos = repos
        self.fits = {}
        self.fill()

    def badge(self, fit: RepoFit) -> bool:
        """A repo's badge arrived: its row drawn again; whether the repo is listed."""
        self.fits[fit.repo_id] = fit
        if fit.repo_id not in self.rows:
            return False
        cells = self._cells(fit.repo_id)
        for key, _, _ in self._columns_shown:
            self.update_cell(fit.repo_id, key, cells[key])
        return True

    def highlighted(self) -> str | None:
        """The repo the cursor is on."""
        if not self.repos:
            return None
        return self.repos[min(max(self.cursor_row, 0), len(self.repos) - 1)].repo_id

    def describe(self, repo_id: str) -> str:
        """What the repo's badge stands for, or why it has none (safe for the terminal)."""
        fit = self.fits.get(repo_id)
        if fit is None:
            text = f"{repo_id}: being planned for this machine (one quant's header is read)"
        elif fit.error:
            text = f"{repo_id}: {fit.error}"
        else:
            count = f"{fit.models} GGUF model{'s' if fit.models != 1 else ''}"
            text = f"{repo_id}: {count}; the badge is its {fit.quant}'s. Enter plans every quant."
        return terminal_safe(text)

    def fill(self) -> None:
        if not self._columns_shown:
            return
        at = self.cursor_row
        redraw(self, self._columns_shown, (self._row(repo.repo_id) for repo in self.repos))
        if self.repos:
            self.move_cursor(row=min(at, len(self.repos) - 1))

    def _row(self, repo_id: str) -> tuple[str, dict[str, object], int]:
        """The repo's row: its key, its cells, and as many lines as its wrapped name takes."""
        cells = self._cells(repo_id)
        name = cells["name"]
        return repo_id, cells, len(name.plain.splitlines()) if isinstance(name, Text) else 1

    def _cells(self, repo_id: str) -> dict[str, object]:
        repo = next((r for r in self.repos if r.repo_id == repo_id), None)
        fit = self.fits.get(repo_id)
        if fit is None:
            badge, kind = "planning…", "pending"
        elif fit.summary is not None and not fit.summary.error:
            badge, kind = fit_badge(fit.summary)
        else:
            badge, kind = (fit.problem or "unreadable"), "error"
        name_width = next((w for key, _, w in self._columns_shown if key == "name"), REPO_NAME_MIN)
        downloads = format_count(repo.downloads) if repo is not None and repo.downloads else "-"
        return {
            "name": _wrapped(repo_id, name_width),
            "quant": terminal_safe(fit.quant if fit else "") or "-",
            "fit": Text(badge, style=badge_style(kind, self.app.current_theme)),
            "downloads": Text(downloads, justify="right"),
            "likes": Text(format_count(repo.likes) if repo and repo.likes else "-", justify="right"),
        }


def found_words(query: str, found: int, offline: str, error: str) -> tuple[str, bool]:
    """What the repos `found` for `query` are, or why there are none (`offline`: why the hub cannot be
    reached, and they are the repos seen before; `error`: why the hub gave none); whether that is an error."""
    what = repr(query)
    if error:
        return f"✗ {error}", True
    if offline:
        seen = f"{found} repo{'s' if found != 1 else ''} seen before"
        words = f"{seen}, from the cache" if found else "No repo seen before matches"
        again = "F5 asks again (and so does coming back with F7)."
        return f"The hub cannot be reached: {_sentence(offline)} {words}. {again}", True
    if not found:
        return (f"No GGUF repo on the hub matches {what}" if query else "The hub lists no GGUF chat repo"), False
    if query:
        match = f"{found} GGUF repo matches" if found == 1 else f"{found} GGUF repos match"
        return f"{match} {what}, the most downloaded first; Enter opens one", False
    return "The hub's most downloaded GGUF chat models; Enter opens one, or type to search", False


def _sentence(text: str) -> str:
    """`text` ending as a sentence does (one full stop, not one after a question mark)."""
    text = text.rstrip()
    return text if text.endswith((".", "?", "!")) else f"{text}."


def format_count(n: int) -> str:
    """A download count as the hub shows it: 950, 12.3k, 4.5M."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size:
            value = n / size
            return f"{value:.1f}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return str(n)


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
