"""Messages the hub view's workers post to it (searching, listing, planning, downloading), and the one it
posts to the app when a download is whole. Each answer carries the request it answers: the view drops
answers to a search or a repo the user has since left."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from app.quants import QuantRow, QuantTable, RepoFit
    from app.sources.download import Download, DownloadResult, Progress
    from app.sources.hub import RepoListing, RepoSummary
    from app.sources.model import ModelSource
    from planner.speed import SpeedPrediction


@dataclass
class ReposFound(Message):
    """A search's answer (or the most downloaded chat repos when `query` is ''); `offline`: the hub could
    not be reached and these are the repos seen before; `error`: why there are none."""

    request: int
    query: str
    repos: list[RepoSummary]
    offline: str = ""
    error: str = ""


@dataclass
class RepoBadged(Message):
    request: int
    fit: RepoFit


@dataclass
class RepoListed(Message):
    """An opened repo's files; `downloaded` maps a model's ref to where it already is on this machine."""

    request: int
    listing: RepoListing | None
    models: list[ModelSource]
    downloaded: dict[str, str]
    error: str = ""
    title: str = ""


@dataclass
class QuantPlanned(Message):
    """One quant of the opened repo planned (or unreadable), as its header arrived."""

    request: int
    index: int
    row: QuantRow


@dataclass
class QuantsPlanned(Message):
    """Every quant of the opened repo planned, the best one chosen."""

    request: int
    table: QuantTable


@dataclass
class QuantSpeeds(Message):
    """The opened repo's speed figures asked again: this CPU was still being measured when it was planned."""

    request: int
    speeds: dict[int, SpeedPrediction]


@dataclass
class DownloadPrepared(Message):
    """What a download would write and whether it fits (or why it cannot start)."""

    source: ModelSource
    plan: Download | None
    error: str = ""
    title: str = ""


@dataclass
class DownloadProgressed(Message):
    progress: Progress


@dataclass
class DownloadEnded(Message):
    """A download that finished (`result`), was cancelled, or failed (`error`, under `title`); `kept`: the
    bytes its hidden partial files hold, what a resume goes on from (0 after a failed checksum)."""

    source: ModelSource
    result: DownloadResult | None
    cancelled: bool = False
    error: str = ""
    title: str = ""
    kept: int = 0


@dataclass
class ModelDownloaded(Message):
    """To the app: a model is whole on this machine; the model list shows it, planned and selected."""

    path: str
    name: str
