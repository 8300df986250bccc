"""Messages that workers post to the UI. Workers never touch widgets: they post one of
these, and the screen that owns the widgets handles it on the UI thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:  # kept out of the startup path: the picker must draw fast
    from app.catalog import CatalogEntry
    from app.devices import DeviceReport
    from app.engine import GenerationStats
    from planner.fit import FitResult
    from planner.speed import SpeedPrediction


@dataclass
class ScanStatus(Message):
    """The scanner is looking in a folder, or planning model `done` of `total`."""

    text: str
    done: int = 0
    total: int = 0


@dataclass
class DevicesProbed(Message):
    report: DeviceReport | None
    error: str = ""


@dataclass
class ScanListed(Message):
    """Files found (summaries from the cache where it had them). `demo_pending`: the demo model is
    being assembled, and comes later with EntriesAdded."""

    entries: list[CatalogEntry]
    demo_pending: bool = False


@dataclass
class EntriesAdded(Message):
    """Files found after the list was drawn (the demo model, once assembled)."""

    entries: list[CatalogEntry]


@dataclass
class EntriesPlanned(Message):
    """Entries planned since the last such message (a batch: one repaint for several rows), and the
    scan's progress: `done` of `total`, `status` saying what is being planned now."""

    entries: list[CatalogEntry]
    status: str
    done: int
    total: int


@dataclass
class ScanFinished(Message):
    planned: int


@dataclass
class PlanComputed(Message):
    """The plan for the picker's current settings (or why they are not valid)."""

    path: str
    request: int  # the request this answers; older answers are ignored
    result: FitResult | None
    error: str = ""
    speed: SpeedPrediction | None = None  # how fast the plan will run (planner.speed)


@dataclass
class LoadProgress(Message):
    fraction: float


@dataclass
class LoadRetrying(Message):
    """A load (or a decode) ran out of memory: the next, smaller plan is being tried."""

    why: str
    changes: list[str]
    memory: bool = True  # False: the engine crashed and is retried without the CPU's extra buffer types


@dataclass
class LoadFinished(Message):
    error: str = ""


@dataclass
class ReplyPiece(Message):
    msg_id: int
    text: str


@dataclass
class PromptFitted(Message):
    """The prompt was built: how full the context is, and whether old turns were dropped."""

    tokens: int
    n_ctx: int
    dropped: int
    near_limit: bool


@dataclass
class ReplyFinished(Message):
    msg_id: int
    text: str
    stats: GenerationStats
    error: str = ""
    # the decode ran out of memory: the model is to be reloaded with a smaller plan
    out_of_memory: Exception | None = None
    # the engine process died (an EngineCrashed): the app says how and offers to reload
    crash: Exception | None = None


@dataclass
class ContextResized(Message):
    """The context grew with the conversation, or shrank for a new chat (a Growth; its error says
    when it could not grow)."""

    growth: object
