"""Messages that workers post to the UI. Workers never touch widgets: they post one of
these, and the screen that owns the widgets handles it on the UI thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:  # kept out of the startup path: the picker must draw fast
    from app.catalog import CatalogEntry
    from app.conversation.outcome import ReplyOutcome
    from app.conversation.recovery import Recovery
    from app.devices import DeviceReport
    from app.engine.types import PromptProgress
    from app.session import Growth
    from planner.fit import FitResult
    from planner.model import ModelAnatomy
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
class EstimateChecked(Message):
    """llama.cpp's dry run confirmed (or corrected) an estimated row's default plan: the entry with its
    checked summary, and that plan."""

    entry: CatalogEntry
    result: FitResult


@dataclass
class ChecksDone(Message):
    """The background checks of estimated rows ended (all done, or cancelled)."""


@dataclass
class PlanComputed(Message):
    """The plan for the picker's current settings (or why they are not valid)."""

    path: str
    request: int  # the request this answers; older answers are ignored
    result: FitResult | None
    error: str = ""
    note: str = ""  # why the vision projector beside the model is not in the plan
    speed: SpeedPrediction | None = None  # how fast the plan will run (planner.speed)


@dataclass
class SpeedAsked(Message):
    """The selected plan's speed asked again: this CPU was still being measured when it was planned."""

    path: str
    request: int
    speed: SpeedPrediction


@dataclass
class LoadRequested(Message):
    """The picker asks for a model to be loaded with this plan (the app switches to the chat)."""

    path: str
    anatomy: ModelAnatomy
    fit: FitResult


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
    note: str = ""  # the model's template was stopped and its family's format used (a PromptBuild's note)


@dataclass
class PromptRead(Message):
    """How far the engine is in reading the prompt of reply `msg_id`, as it says it."""

    msg_id: int
    progress: PromptProgress


@dataclass
class ReplyFinished(Message):
    """A reply ended: how (app.conversation.outcome), and what the session's recovery policy says to do about it."""

    msg_id: int
    outcome: ReplyOutcome
    recovery: Recovery | None = None


@dataclass
class ContextResized(Message):
    """The context grew with the conversation, or shrank for a new chat (its error says when it could
    not grow; `after` 0: the resize failed outright)."""

    growth: Growth
