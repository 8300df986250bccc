"""The conversation's runway: how many more tokens it can take before the context must grow, and
before it can grow no more, at the pace the conversation goes; said in words.

The context holds `used` tokens of `committed` (what llama.cpp allocated) and may grow, step by
step (`planner.elastic.steps`), up to `maximum` (what the plan reserved room for). Growth needs the
device memory the plan counted on: if another program took some of it since the load, the context
can reach only `reachable`. Once the conversation would pass that, the oldest turns are left out
of the prompt (app.conversation.prompt.build_prompt): the runway warns a few turns before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from planner.elastic import next_size, steps
from planner.memory import DeviceUsage, MemoryPlan

TURNS_KEPT = 5  # the pace is the mean of the last few turns
WARN_TURNS = 3  # warn when fewer turns than this are left


@dataclass
class TurnPace:
    """The tokens each turn (a prompt and its reply) adds to the context, learned as the chat goes.

    `record(total, turns)` is told the tokens the conversation holds after each reply and the messages its
    prompt held. A reply to as many messages as an earlier one, or fewer (a retry, an edited message, a
    branch from an earlier one), replaces that turn and those after it: it is not a turn of its own. A
    total that falls means another conversation (a new chat, another one opened) or the oldest turns left
    out of the prompt: the pace starts again."""

    totals: list[int] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)  # the messages each total's prompt held (when told)

    def record(self, total: int, turns: int | None = None) -> None:
        if turns is not None and len(self.turns) == len(self.totals):
            while self.turns and self.turns[-1] >= turns:
                self.turns.pop()
                self.totals.pop()
        if self.totals and total < self.totals[-1]:
            self.totals.clear()
            self.turns.clear()
        if turns is not None and len(self.turns) == len(self.totals):
            self.turns.append(turns)
        else:  # a total without its count (a server's request): the counts no longer go with the totals
            self.turns.clear()
        self.totals.append(total)
        del self.totals[: -(TURNS_KEPT + 1)]
        del self.turns[: -(TURNS_KEPT + 1)]

    def reset(self) -> None:
        self.totals.clear()
        self.turns.clear()

    @property
    def per_turn(self) -> int | None:
        """Tokens a turn, the mean of the last turns; the first turn alone (with its system prompt)
        stands in until there is a second; None before any."""
        if not self.totals:
            return None
        if len(self.totals) == 1:
            return self.totals[0] or None
        added = [b - a for a, b in zip(self.totals, self.totals[1:])]
        mean = sum(added) / len(added)
        return max(round(mean), 1)


@dataclass(frozen=True)
class Runway:
    used: int  # tokens the context holds now
    committed: int  # the context allocated now
    maximum: int  # the context the plan reserved room for
    reachable: int  # the largest context the devices can still grow to (<= maximum)
    per_turn: int | None = None  # tokens a turn, when known
    next_step: int | None = None  # the size the context grows to next (None: it grows no more)

    @property
    def grows(self) -> bool:
        return self.next_step is not None and self.committed < self.reachable

    @property
    def until_growth(self) -> int | None:
        """Tokens before the context must grow; None when it will not grow again."""
        return max(self.committed - self.used, 0) if self.grows else None

    @property
    def until_full(self) -> int:
        """Tokens before the conversation fills the largest context it can have."""
        return max(max(self.reachable, self.committed) - self.used, 0)

    @property
    def turns_left(self) -> int | None:
        if not self.per_turn:
            return None
        return self.until_full // self.per_turn

    @property
    def warning(self) -> str:
        """A warning before the oldest turns would be left out of the prompt; empty while far off."""
        if self.until_full == 0:
            return "The context is full: the oldest turns are left out of the prompt."
        left = self.turns_left
        if left is not None and left < WARN_TURNS:
            turns = "another turn" if left <= 1 else f"about {left} more turns"
            return f"After {turns} the oldest turns will be left out of the prompt."
        return ""

    def sentences(self) -> list[str]:
        """The runway in words, most important first: one sentence each."""
        first = about(self.until_full)
        if self.grows:
            first = (
                f"{about(self.until_growth or 0)} tokens until the context grows "
                f"(to {self.next_step:,}); {about(self.until_full)} until full"
            )
        else:
            first = f"{first} tokens until the context is full"
        lines = [first[0].upper() + first[1:] + "."]
        if self.reachable < self.maximum:
            lines.append(
                f"Another program took memory the plan counted on: the context can grow to {self.reachable:,} "
                f"tokens, not {self.maximum:,}."
            )
        if self.per_turn:
            left = self.turns_left or 0
            count = about(left) if left >= 100 else f"about {left}"
            turns = "less than one turn" if left < 1 else f"{count} turn{'s' if left != 1 else ''}"
            tokens = "token" if self.per_turn == 1 else "tokens"
            lines.append(f"About {self.per_turn:,} {tokens} a turn: room for {turns}.")
        return lines


def about(n: int) -> str:
    """A token count as a person says it, rounded down to two figures (never more room than there
    is): 'about 2,100', exact below a hundred."""
    if n < 100:
        return f"{n:,}"
    unit = 10 ** (len(str(n)) - 2)
    return f"about {n // unit * unit:,}"


def reachable_context(
    plan: MemoryPlan, now: MemoryPlan, committed: int, free: Mapping[str, int], maximum: int | None = None
) -> int:
    """The largest context step the devices can still grow to: each device's growth (the maximum
    plan's bytes less those committed now) against its free memory now less its margin. Growth is
    taken as linear in the context between the two plans (the KV cache is; compute nearly so).
    A device whose free memory is unknown is taken to have what the plan counted on."""
    maximum = maximum or plan.resolved.n_ctx
    if committed >= maximum:
        return committed
    share = 1.0
    for full, current in _pairs(plan, now):
        growth = full.planned - current.planned
        if growth <= 0 or full.name not in free:
            continue
        room = free[full.name] - full.margin
        share = min(share, max(room, 0) / growth)
    if share >= 1.0:
        return maximum
    limit = committed + (maximum - committed) * share
    fitting = [s for s in steps(maximum) if s <= limit]
    return max([committed, *fitting])


def _pairs(plan: MemoryPlan, now: MemoryPlan) -> list[tuple[DeviceUsage, DeviceUsage]]:
    current = {d.name: d for d in [*now.gpus, now.host]}
    return [(d, current[d.name]) for d in [*plan.gpus, plan.host] if d.name in current]


def runway(
    used: int,
    committed: int,
    maximum: int,
    per_turn: int | None = None,
    reachable: int | None = None,
    elastic: bool = True,
) -> Runway:
    """The runway for a context of `committed` tokens holding `used`, growing (when `elastic`) up
    to `reachable` of the plan's `maximum`."""
    maximum = max(maximum, committed)
    if not elastic:
        reachable = committed
    reachable = min(maximum, reachable if reachable is not None else maximum)
    step = next_size(committed, committed + 1, maximum) if committed < reachable else None
    if step is not None:
        step = min(step, reachable)
    return Runway(used, committed, maximum, reachable, per_turn, step)
