"""How a reply ended: what the screen, the command line and the recovery policy read, and the words for it
(a reply's note, and what an empty reply is called where it stays in the transcript)."""

from __future__ import annotations

from dataclasses import dataclass

from app.conversation.reasoning import Thought
from app.engine.crash import EngineCrashed
from app.engine.types import EngineError, GenerationStats

# how a reply ended, for the screen: a normal end (eos, stop, length, user), a message the context
# cannot hold, a decode out of memory (reload smaller), the engine process died, anything else
OK, REFUSED, OUT_OF_MEMORY, CRASHED, FAILED = "ok", "refused", "out_of_memory", "crashed", "failed"
ENGINE_CRASH = "engine_crash"  # stopped_by of a reply the engine process's death cut short


@dataclass
class ReplyOutcome:
    kind: str
    text: str
    stats: GenerationStats
    error: str = ""
    engine_error: EngineError | None = None  # set for OUT_OF_MEMORY and CRASHED
    thought: Thought | None = None  # how long the reply's reasoning took, when it had some

    @property
    def crash(self) -> EngineCrashed | None:
        return self.engine_error if isinstance(self.engine_error, EngineCrashed) else None


STOP_WORDS = {
    "eos": "",
    "stop": "",
    "length": "stopped at the max tokens limit",
    "user": "stopped",
    "context": "stopped: the context is full",
    "error": "failed",
    "engine_crash": "cut short: the engine crashed",
}


def stop_note(stopped_by: str) -> str:
    return STOP_WORDS.get(stopped_by, stopped_by)


def empty_reply_marker(stopped_by: str) -> str:
    """What an empty reply is called where it stays in the transcript (the screen, the export), by how it ended."""
    if stopped_by == "context":
        return "no reply: the prompt filled the context"
    if stopped_by == "user":
        return "no reply: stopped before the model wrote anything"
    if stopped_by == "length":
        return "no reply: the reply's token limit is 0"
    if stopped_by in ("error", "engine_crash", "crash"):
        return f"no reply: {stop_note(stopped_by)}"
    return "no reply: the model ended its reply at once"
