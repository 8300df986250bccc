"""--rpc on the command line: plans name the servers' devices, a server that is not there is a clear
error, and `-p` answers from a model split over RPC with every device's memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import cli
from app.rpc.endpoint import Endpoint
from tests.support.rpc import free_port


def test_a_plan_over_a_server_names_its_device_and_the_flag(
    zoo: dict[str, Path], rpc_endpoints: list[Endpoint], capsys: pytest.CaptureFixture[str]
) -> None:
    server = str(rpc_endpoints[0])
    assert cli.main(["--plan", str(zoo["llama-f16"]), "--json", "--rpc", server]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["name"], d["backend"], d["endpoint"]) for d in data["devices"]] == [("RPC0", "rpc", server)]
    assert data["devices"][0]["layers"] > 0 and {b["device"] for b in data["buffers"]} >= {"RPC0", "CPU"}
    assert data["llama_args"][-2:] == ["--rpc", server]
    assert any("crosses it both ways" in r for r in data["reasons"])  # what the network costs


def test_a_server_that_is_not_there_fails_the_plan_with_the_reason(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    assert cli.main(["--plan", str(zoo["llama-f16"]), "--rpc", nowhere]) == cli.EXIT_BAD_FILE
    err = capsys.readouterr().err
    assert f"RPC server {nowhere} is left out" in err and "connection refused" in err and "--rpc none" in err
    assert cli.main(["--plan", str(zoo["llama-f16"]), "--rpc", "nowhere"]) == cli.EXIT_USAGE
    assert "--rpc" in capsys.readouterr().err


def test_one_shot_answer_from_a_model_split_over_two_servers(
    rpc_endpoints: list[Endpoint], capsys: pytest.CaptureFixture[str]
) -> None:
    servers = ",".join(str(e) for e in rpc_endpoints)
    question = "What is the capital of France?"
    assert cli.main(["demo", "-p", question, "-n", "16", "--temp", "0", "--json", "--rpc", servers]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "Paris" in data["answer"]
    allocated, planned = data["memory"]["allocated"], data["memory"]["planned"]
    assert set(allocated) == set(planned) == {"CPU", "RPC0", "RPC1"}
    for device, size in planned.items():  # to the log's 0.01 MiB per buffer line
        assert abs(allocated[device] - size) < 64 * 1024, device
