"""How a reply ended: what the screen, the command line and the recovery policy read."""

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
