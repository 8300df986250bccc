"""The picker's knobs: parsing, solving when blank, evaluating when GPU layers are fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.planning import PlanChoice, parse_choice, plan_model
from planner.anatomy import load_anatomy
from planner.errors import ConfigError
from planner.gguf import read_gguf
from planner.hardware import GiB, Host
from tests.support.fake_gpus import simulated_gpus


def test_parse() -> None:
    assert parse_choice("", "auto", "", "auto").is_default
    assert parse_choice("8,192", "q8_0", "3", "on") == PlanChoice(8192, "q8_0", 3, "on")
    with pytest.raises(ConfigError, match="between 256"):
        parse_choice("12", "auto", "", "auto")
    with pytest.raises(ConfigError, match="not a whole number"):
        parse_choice("lots", "auto", "", "auto")


def test_plan_model(zoo: dict[str, Path]) -> None:
    model = load_anatomy(read_gguf(zoo["llama-f16"]))
    gpus, host = simulated_gpus([8 * GiB]), Host(32 * GiB, 30 * GiB)
    solved = plan_model(model, gpus, host, PlanChoice())
    assert solved.solved and solved.plan.verdict == "full_gpu"
    fixed = plan_model(model, gpus, host, PlanChoice(n_ctx=1024, kv="q8_0", n_gpu_layers=2, flash_attn="on"))
    assert not fixed.solved
    assert fixed.plan.layers_on_gpu == 2 and fixed.plan.resolved.n_ctx == 1024
    assert fixed.plan.resolved.type_k.name == "q8_0" and fixed.plan.resolved.type_v.name == "q8_0"
    # KV type fixed, layers left to the solver
    q8 = plan_model(model, gpus, host, PlanChoice(kv="q8_0"))
    assert q8.plan.resolved.type_k.name == "q8_0"
    # a tiny host: nothing fits, and the verdict says so
    tiny = plan_model(model, [], Host(64 * 1024 * 1024, 16 * 1024 * 1024), PlanChoice(n_ctx=4096, n_gpu_layers=0))
    assert tiny.plan.verdict == "no_fit"


@pytest.mark.parametrize("gpus", [[], simulated_gpus([8 * GiB])], ids=["cpu", "gpu"])
def test_the_picker_and_the_command_line_fix_a_configuration_alike(
    zoo: dict[str, Path], gpus, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """GPU layers fixed, the rest left out: the same configuration from the picker's knobs and from
    `vramchat --plan --ngl N` (flash attention, KV types, context)."""
    import json

    from app.cli import main

    path = zoo["llama-f16"]
    model = load_anatomy(read_gguf(path))
    host = Host(64 * GiB, 64 * GiB)
    picked = plan_model(model, gpus, host, PlanChoice(n_ctx=2048, n_gpu_layers=2)).plan.config
    if gpus:
        monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB,ram=64GiB")
    else:
        monkeypatch.setenv("VRAMCHAT_DEVICES", "ram=64GiB")
    assert main(["--plan", str(path), "--ngl", "2", "--ctx", "2048", "--json"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert (config["flash_attn"], config["type_k"], config["type_v"], config["n_ctx"]) == (
        picked.flash_attn,
        picked.type_k,
        picked.type_v,
        picked.n_ctx,
    )
    assert config["n_gpu_layers"] == picked.n_gpu_layers


def test_quants_of_a_folder_probes_the_devices_once(
    zoo: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each probe may start a child process, ask NVML and call RPC servers: one per command, not per file."""
    import json
    import shutil

    import app.devices
    from app.cli import main

    folder = tmp_path / "quants"
    folder.mkdir()
    for name in ("llama-f16", "llama-q8_0", "llama-q4_k"):
        shutil.copy(zoo[name], folder / f"{name}.gguf")
    probes: list[tuple] = []
    probe = app.devices.probe_devices
    monkeypatch.setattr(app.devices, "probe_devices", lambda *a, **k: probes.append(a) or probe(*a, **k))
    code = main(["--quants", str(folder), "--json", "--vram", "2GiB", "--ram", "16GiB"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = json.loads(out)["models"]
    assert len(rows) == 3 and all(r["verdict"] == "full_gpu" for r in rows)
    assert len(probes) == 1


def test_a_plan_checked_without_the_projector_is_not_kept_once_vision_is_on(tmp_path: Path) -> None:
    """The picker keeps the plan llama.cpp's dry run checked for the default choice; that plan has no
    projector, so with Vision on the model is planned again, projector included."""
    from types import SimpleNamespace

    from app.planning import plan_source, projector_among
    from tests.support.vision import write_vision_pair

    model_path, mmproj = write_vision_pair(tmp_path, "gemma3")
    devices = SimpleNamespace(gpus=simulated_gpus([8 * GiB]), host=Host(32 * GiB, 30 * GiB))
    checked = plan_source(str(model_path), devices, PlanChoice()).fit  # what the picker keeps as checked
    plain = plan_source(str(model_path), devices, PlanChoice(), known=checked)
    assert plain.fit is checked  # kept where it was made for this very choice
    vision = plan_source(
        str(model_path), devices, PlanChoice(), projector=projector_among([str(mmproj)]), known=checked
    )
    assert vision.projector is not None
    assert vision.fit is not checked
    assert vision.fit.plan.projector is not None  # its weights and compute planned beside the model
    assert any(b.kind.startswith("projector") for b in vision.fit.plan.buffers)
