"""`vramchat --plan MODEL --gpu CARD`: planning for a card you do not have, with that card's overhead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from planner.hardware import MiB
from tests.support.gpu_record import DATA
from tests.support.header_clone import write


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["--plan", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_an_rtx_4060_plans_its_own_small_cuda_context(capsys: pytest.CaptureFixture[str], gemma_path: Path) -> None:
    code, data = _plan(capsys, "demo", "--gpu", "RTX 4060")
    assert code == 0 and data["verdict"] == "full_gpu"
    (gpu,) = data["devices"]
    detail = gpu["overhead_detail"]
    assert abs(detail["context"] - 84 * MiB) <= 1 * MiB  # 13 MiB + 2,002 B x 24 SMs x 1,536 threads
    assert detail["runtime"] == 104 * MiB and not detail["learned"] and not detail["estimate"]
    assert gpu["overhead"] < 200 * MiB  # not 518 MiB of an H100's context
    assert "24 SMs" in detail["source"]
    assert data["simulated_devices"] is True


def test_an_h100_keeps_the_recorded_figures(capsys: pytest.CaptureFixture[str], gemma_path: Path) -> None:
    _, fa = _plan(capsys, "demo", "--gpu", "H100")
    _, cublas = _plan(capsys, "demo", "--gpu", "h100", "--fa", "off")
    assert fa["devices"][0]["overhead_detail"]["context"] == 518 * MiB
    assert fa["devices"][0]["overhead_detail"]["runtime"] == 104 * MiB
    # without flash attention: the recorded cuBLAS runtime less its runs' 16 MiB attention pool, and the pool
    # at the full context (32,768 cells x 512 tokens x 4 heads as F16, and the output's 2 MiB page)
    detail = cublas["devices"][0]["overhead_detail"]
    assert detail["parts"]["attention_pool"] == 130 * MiB
    assert detail["runtime"] == (190 - 16) * MiB + detail["parts"]["attention_pool"]
    assert fa["devices"][0]["total"] == 81079 * MiB  # what CUDA reported on ours


def test_several_cards_and_bad_names(capsys: pytest.CaptureFixture[str], gemma_path: Path) -> None:
    _, data = _plan(capsys, "demo", "--gpu", "2x RTX 3090", "--ngl", "-1")
    assert [d["name"] for d in data["devices"]] == ["CUDA0", "CUDA1"]
    assert main(["--plan", "demo", "--gpu", "RTX 4091"]) == 2
    err = capsys.readouterr().err
    assert "unknown GPU 'RTX 4091'" in err and "'RTX 4090'" in err and "Traceback" not in err
    assert main(["--plan", "demo", "--gpu", "RTX 4090", "--gpu", "RX 7900 XTX"]) == 2
    assert "one kind of GPU" in capsys.readouterr().err
    assert main(["--plan", "demo", "--gpu", "RTX 4090", "--vram", "8GiB"]) == 2
    assert "use one of them" in capsys.readouterr().err
    assert main(["--gpu", "list"]) == 0
    table = capsys.readouterr().out
    assert "RTX 4090" in table and "MI300X" in table and "M4 Max 128GB" in table


def test_a_mac_too_small_for_a_full_load_is_told_how_to_raise_its_working_set(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # an 8B model with 57,344 tokens of f16 cache: 11.3 GiB, above a 16 GB Mac's 10.67 GiB working set
    model = write(DATA / "llama-8b-shape.header.json.gz", tmp_path / "big.gguf", sparse=True)
    code, data = _plan(capsys, str(model), "--gpu", "M2 16GB", "--ngl", "-1", "--ctx", "57344", "--fa", "on")
    assert code == 3 and data["verdict"] == "no_fit"
    (advice,) = data["advice"]
    assert "sudo sysctl iogpu.wired_limit_mb=12288" in advice
    assert data["devices"][0]["backend"] == "metal" and data["host"]["total"] == 16 * 1024 * MiB
    assert main(["--plan", str(model), "--gpu", "M2 16GB", "--ctx", "57344"]) == 0
    assert "Advice:" not in capsys.readouterr().out  # the solver found a plan that fits: nothing to raise
