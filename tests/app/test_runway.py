"""The runway: tokens until the context grows and until it is full, the pace, the words."""

from __future__ import annotations

from pathlib import Path

from app.telemetry.runway import TurnPace, about, reachable_context, runway
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.elastic import committed_plan
from planner.gguf import read_gguf
from planner.hardware import GiB, Host, MiB
from planner.memory import plan_memory


def test_tokens_until_the_context_grows_and_until_full() -> None:
    way = runway(used=1_900, committed=4_096, maximum=32_768, per_turn=350)
    assert way.next_step == 8_192 and way.until_growth == 2_196 and way.until_full == 30_868
    assert way.turns_left == 88 and way.warning == ""
    words = way.sentences()
    assert words[0] == "About 2,100 tokens until the context grows (to 8,192); about 30,000 until full."
    assert words[1] == "About 350 tokens a turn: room for about 88 turns."


def test_a_context_at_its_maximum_no_longer_grows_and_warns_before_turns_are_left_out() -> None:
    way = runway(used=31_900, committed=32_768, maximum=32_768, per_turn=400)
    assert way.next_step is None and way.until_growth is None and way.until_full == 868
    assert way.sentences()[0] == "About 860 tokens until the context is full."
    assert way.warning == "After about 2 more turns the oldest turns will be left out of the prompt."
    full = runway(used=32_768, committed=32_768, maximum=32_768)
    assert full.warning == "The context is full: the oldest turns are left out of the prompt."
    assert runway(32_000, 32_768, 32_768, per_turn=700).warning.startswith("After another turn")


def test_a_fixed_context_never_grows_and_a_device_short_of_room_stops_it_early() -> None:
    fixed = runway(used=100, committed=4_096, maximum=32_768, elastic=False)
    assert fixed.next_step is None and fixed.until_full == 3_996
    pace = runway(used=27, committed=4_096, maximum=32_768, per_turn=14).sentences()[-1]
    assert pace == "About 14 tokens a turn: room for about 2,300 turns."  # an average: not to the turn
    short = runway(used=100, committed=4_096, maximum=32_768, reachable=16_384)
    assert short.next_step == 8_192 and short.until_full == 16_284
    assert "can grow to 16,384 tokens, not 32,768" in " ".join(short.sentences())


def test_about_rounds_down_as_a_person_says_it() -> None:
    # never more room than there is: 32,741 tokens left of 32,768 is not "about 33,000"
    assert [about(n) for n in (42, 2_196, 32_741, 131_072)] == ["42", "about 2,100", "about 32,000", "about 130,000"]


def test_the_pace_is_the_mean_of_the_last_turns_and_restarts_with_another_chat() -> None:
    pace = TurnPace()
    assert pace.per_turn is None
    pace.record(300)
    assert pace.per_turn == 300  # the first turn stands in (with its system prompt)
    pace.record(500)
    pace.record(800)
    assert pace.per_turn == 250
    pace.record(40)  # fewer tokens than before: another conversation
    assert pace.per_turn == 40 and pace.totals == [40]


def test_the_reachable_context_follows_the_free_memory_of_the_devices(zoo: dict[str, Path]) -> None:
    anatomy = load_anatomy(read_gguf(zoo["llama-f16"]))
    host = Host(total=4 * GiB, free=2 * GiB)
    plan = plan_memory(anatomy, LoadConfig(n_ctx=32_768), [], host)
    now = committed_plan(plan, 4_096, [], host)
    growth = plan.host.planned - now.host.planned
    margin = plan.host.margin
    assert growth > 0
    # as much free as the plan counted on: the whole way; half the growth: half the steps; none: where it is
    assert reachable_context(plan, now, 4_096, {"CPU": 2 * GiB}) == 32_768
    half = reachable_context(plan, now, 4_096, {"CPU": margin + growth // 2})
    assert 4_096 < half < 32_768 and half == 16_384
    assert reachable_context(plan, now, 4_096, {"CPU": margin + MiB // 4}) == 4_096
    assert reachable_context(plan, now, 4_096, {}) == 32_768  # nothing read: as planned
