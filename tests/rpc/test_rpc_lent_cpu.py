"""A CPU lent over RPC (`serve-rpc` on a machine without a GPU) is named where the layers go, never
called a GPU: the plan's verdict, its table and the picker's badge say "RPC0 (a remote CPU)"; the
--plan JSON keeps its verdict name and adds the words and the device's `remote_cpu`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from app import cli
from app.rpc.endpoint import RPC_ENV, Endpoint
from app.tui.screens.picker import PickerScreen
from tests.support.rpc import Claims, fake_rpc_server
from tests.support.tui_helpers import make_app, picker_ready, wait_for

GPU_WORDS = ("every layer on the GPU", "full GPU", "layers on GPU")


def test_a_plan_onto_a_lent_cpu_names_it_and_never_says_gpu(
    zoo: dict[str, Path], rpc_endpoints: list[Endpoint], capsys: pytest.CaptureFixture[str]
) -> None:
    model, server = str(zoo["llama-f16"]), str(rpc_endpoints[0])
    assert cli.main(["--plan", model, "--rpc", server]) == 0
    table = capsys.readouterr().out
    verdict = next(line for line in table.splitlines() if line.startswith("Verdict:"))
    assert verdict.startswith("Verdict: FITS: every layer on RPC0 (a remote CPU) ·"), verdict
    assert "layers on RPC0" in verdict
    assert not any(words in table for words in GPU_WORDS), table
    assert "to RPC0 (a remote CPU)" in table  # the settings' layer count says where they go

    assert cli.main(["--plan", model, "--json", "--rpc", server]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "full_gpu"  # the contract's name stays
    assert data["verdict_words"] == "FITS: every layer on RPC0 (a remote CPU)"
    assert data["devices"][0]["remote_cpu"] is True


def test_a_server_lending_a_gpu_keeps_the_gpu_words(zoo: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """A server whose buffers are not the CPU's (a 2**40-byte largest buffer, as a GPU sets) is a GPU."""
    with fake_rpc_server(Claims()) as endpoint:
        assert cli.main(["--plan", str(zoo["llama-f16"]), "--json", "--rpc", str(endpoint)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["devices"][0]["remote_cpu"] is False
    assert data["verdict_words"] == "FITS: every layer on the GPU"


async def test_the_picker_badges_a_lent_cpu_by_name(
    tmp_path: Path, zoo: dict[str, Path], rpc_endpoints: list[Endpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    model = shelf / "llama-f16.gguf"
    shutil.copy(zoo["llama-f16"], model)
    monkeypatch.setenv(RPC_ENV, str(rpc_endpoints[0]))  # as `--rpc` or F6 leave it
    app = make_app(shelf)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, picker_ready(app))
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        table = screen.query_one(DataTable)
        await wait_for(pilot, lambda: str(model) in table.rows and "tok" in str(table.get_cell(str(model), "fit")))
        assert str(table.get_cell(str(model), "fit")).startswith("RPC0 CPU · ")
        await wait_for(pilot, lambda: "FITS" in str(screen.query_one("#plan-text", Static).render()))
        plan_text = str(screen.query_one("#plan-text", Static).render())
        assert "every layer on RPC0 (a remote CPU)" in plan_text
        assert not any(words in plan_text for words in GPU_WORDS), plan_text
