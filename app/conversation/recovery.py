"""What to do after a reply failed: the recovery policy, decided once for every front end.

`recovery_for` reads how the reply ended (app.conversation.outcome.ReplyOutcome) and the plan that was running,
and says what the session should do: reload with a smaller plan (the evidence points to memory),
reload without the RPC servers that stopped answering, reload without the CPU's extra buffer types
(a crash in their kernels), or offer to reload the same plan (a crash with no better lead). The
screen only shows the words and, for the last, asks the user; `ModelSession.carry_out` acts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.conversation.outcome import CRASHED, OUT_OF_MEMORY
from app.engine.failure import first_line, refusal

if TYPE_CHECKING:
    from app.conversation.outcome import ReplyOutcome
    from app.engine.types import EngineError
    from planner.memory import MemoryPlan

SMALLER = "smaller"  # the same model, the planner's next smaller plan
WITHOUT_LOST_SERVERS = "without_lost_servers"  # planned again for the devices still answering
WITHOUT_EXTRA_BUFFERS = "without_extra_buffers"  # the same plan, CPU_REPACK / AMX off
SAME = "same"  # the same plan again, once the user agrees


@dataclass(frozen=True)
class Recovery:
    """One recovery: what to do, and the words for the user (a title and what happened)."""

    action: str
    title: str
    message: str
    error: EngineError

    @property
    def ask_user(self) -> bool:
        """Whether the user decides (nothing points to a cure: reloading may crash again)."""
        return self.action == SAME

    @property
    def status(self) -> str:
        """The load bar's words while the recovery runs."""
        return {
            SMALLER: "Reloading with a smaller plan…",
            WITHOUT_LOST_SERVERS: "Reloading without the lost RPC server…",
            WITHOUT_EXTRA_BUFFERS: "Reloading without the CPU's extra buffer types…",
            SAME: "Reloading…",
        }[self.action]


def retry_words(why: str, changes: list[str]) -> str:
    """What a user reads when a load ran out of memory and the next smaller plan is tried: what failed
    (the pool and size that llama.cpp could not allocate, where it said) and what the new plan changes."""
    refused = refusal(why)
    head = f"{first_line(why)}: {refused}" if refused else first_line(why)
    return f"{head}\nTrying a smaller plan: {'; '.join(changes)}."


def recovery_for(outcome: ReplyOutcome, plan: MemoryPlan) -> Recovery | None:
    """The recovery a failed reply calls for; None when the model is still loaded and well (the
    reply was refused, stopped or failed for a reason a reload would not cure)."""
    kept = "What was written is kept."
    if outcome.kind == OUT_OF_MEMORY and outcome.engine_error is not None:
        first = first_line(outcome.error)
        return Recovery(
            SMALLER, "Out of memory", f"{first}\n{kept} Reloading the model with a smaller plan…", outcome.engine_error
        )
    crash = outcome.crash
    if outcome.kind != CRASHED or crash is None:
        return None
    info = crash.exit
    if info.rpc_failure and any(d.backend == "rpc" for d in plan.gpus):
        return Recovery(
            WITHOUT_LOST_SERVERS,
            "An RPC server stopped answering",
            f"{info.message()}\n{kept} Reloading without the servers that no longer answer…",
            crash,
        )
    if info.memory:
        return Recovery(
            SMALLER, "The engine ran out of memory", f"{info.message()}\n{kept} Reloading with a smaller plan…", crash
        )
    if info.cpu_extra_buffer and plan.config.cpu_extra_buffers is not False:
        return Recovery(
            WITHOUT_EXTRA_BUFFERS,
            "The engine crashed",
            f"{info.message()}\n{kept} Reloading without the CPU's extra buffer types "
            f"({', '.join(info.extra_buffers)})…",
            crash,
        )
    return Recovery(
        SAME,
        "The engine stopped",
        f"{info.message()}\n\nThe conversation and what the model had written are kept. vramchat itself is "
        "unharmed. Reload the model and carry on?",
        crash,
    )
