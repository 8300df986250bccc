"""A server that lies or drips is not believed: `--plan --rpc` leaves it out with the reason, in
words, and ends in time (issue 36, case 3). The servers are fakes on 127.0.0.1 speaking the protocol."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from app import cli
from app.rpc import wire
from planner.hardware import GiB
from tests.support.rpc import Claims, fake_rpc_server


def _plan(model: Path, server: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    started = time.monotonic()
    code = cli.main(["--plan", str(model), "--rpc", server])
    captured = capsys.readouterr()
    return code, captured.out + captured.err, time.monotonic() - started


@pytest.mark.parametrize(
    "claims, said",
    [
        (Claims(free=2**64 - 1, total=2**64 - 1), r"device 0 claims 16,777,216 TiB of memory .*more than the 64 TiB"),
        (Claims(free=2**64 - 1, total=16 * GiB), r"device 0 claims 18,446,744,073,709,551,615 bytes free of "),
        (Claims(free=24 * GiB, total=16 * GiB), r"free memory cannot exceed the total"),
        (Claims(devices=100_000), r"claims 100,000 devices, and llama\.cpp's RPC server lends at most 16"),
    ],
    ids=["free-and-total-2^64", "free-2^64", "free-over-total", "100000-devices"],
)
def test_a_server_claiming_what_none_could_is_left_out_with_the_reason(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str], claims: Claims, said: str
) -> None:
    with fake_rpc_server(claims) as endpoint:
        code, out, took = _plan(zoo["llama-f16"], str(endpoint), capsys)
    assert code == cli.EXIT_BAD_FILE
    assert f"RPC server {endpoint} is left out" in out and "not believed" in out, out
    assert re.search(said, out), out
    assert "17179869184" not in out and "please report" not in out
    assert took < 20  # asked once and refused: not 300,000 questions


def test_a_server_that_answers_a_byte_at_a_time_is_cut_off_at_the_deadline(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each byte comes well inside the per-read timeout, so only the whole query's deadline ends it
    (all its answers at 0.2 s a byte would take over a minute)."""
    monkeypatch.setattr(wire, "QUERY_DEADLINE", 1.0)
    with fake_rpc_server(Claims(devices=4, drip=0.2)) as endpoint:
        code, out, took = _plan(zoo["llama-f16"], str(endpoint), capsys)
    assert code == cli.EXIT_BAD_FILE
    assert f"RPC server {endpoint} is left out" in out and "did not finish answering within 1 s" in out, out
    assert took < 1.0 + wire.DEFAULT_TIMEOUT + 5


def test_slow_servers_are_asked_at_once_not_one_after_another(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "QUERY_DEADLINE", 2.0)
    with (
        fake_rpc_server(Claims(drip=0.2)) as a,
        fake_rpc_server(Claims(drip=0.2)) as b,
        fake_rpc_server(Claims(drip=0.2)) as c,
        fake_rpc_server(Claims(drip=0.2)) as d,
    ):
        code, out, took = _plan(zoo["llama-f16"], f"{a},{b},{c},{d}", capsys)
    assert code == cli.EXIT_BAD_FILE and "did not finish answering" in out
    assert took < 2.0 + wire.DEFAULT_TIMEOUT  # four deadlines one after another would be 8 s or more


def test_a_huge_but_believable_server_keeps_the_plan_table_columns_apart(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """60 TiB is believed (a big CPU server); its figure, 61440.00 GiB, is wider than a column."""
    with fake_rpc_server(Claims(free=60 * 1024 * GiB, total=60 * 1024 * GiB)) as endpoint:
        code, out, _ = _plan(zoo["llama-f16"], str(endpoint), capsys)
    assert code == 0, out
    row = next(line for line in out.splitlines() if line.strip().startswith("RPC0"))
    assert "61440.00 GiB" in row and not re.search(r"B[\d-]", row), row
