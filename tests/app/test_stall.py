"""How long a reply may go without a word from the engine: long enough for the slowest step the plan
predicts, never so long that a stopped engine looks like a slow one for minutes."""

from __future__ import annotations

import pytest

from app.engine.stall import ENV, FLOOR_SECONDS, UNKNOWN_SECONDS, stall_limit


def test_a_fast_model_gets_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert stall_limit(decode_tps=50.0, prefill_tps=500.0, n_batch=512) == FLOOR_SECONDS


def test_a_slow_prefill_is_not_taken_for_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 70B on a CPU reads 512 tokens in about a minute and a half: twenty such steps are allowed."""
    monkeypatch.delenv(ENV, raising=False)
    assert stall_limit(decode_tps=1.0, prefill_tps=6.0, n_batch=512) == pytest.approx(20 * 512 / 6.0)


def test_an_unknown_speed_gets_a_generous_limit_and_the_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert stall_limit(None, 100.0, 512) == UNKNOWN_SECONDS
    monkeypatch.setenv(ENV, "3")
    assert stall_limit(None, None, 512) == 3.0
