"""`vramchat --devices` and what `--plan` says about devices: held memory, the mismatch, simulation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from tests.support.fake_gpus import (
    FakeNvidia,
    GiB,
    cpu_device,
    fake_pynvml,
    install_llama_devices,
    install_nvml,
    install_rocml,
)

ROOT = Path(__file__).resolve().parents[2]
PROBES = ("llama.cpp", "NVML", "ROCm (pyrsmi)", "Metal", "host")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "VRAMCHAT_DEVICES"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT, env=full_env, timeout=120
    )


def test_devices_on_this_machine_reports_every_probe_cleanly() -> None:
    proc = _run("--devices")
    assert proc.returncode == 0
    assert proc.stderr == ""  # no library's complaint leaks to the terminal
    lines = proc.stdout.splitlines()
    for name in PROBES:
        assert any(line.startswith(("  ok ", "  -- ")) and line[5:].startswith(name) for line in lines), name
    assert "Devices vramchat plans for" in proc.stdout and "host     RAM" in proc.stdout


def test_devices_json_on_this_machine() -> None:
    proc = _run("--devices", "--json")
    assert proc.returncode == 0 and proc.stderr == ""
    data = json.loads(proc.stdout)
    assert [p["name"] for p in data["probes"]] == list(PROBES)
    for probe in data["probes"]:
        assert isinstance(probe["available"], bool)
        assert probe["available"] or probe["detail"].startswith("unavailable: ")
    assert data["host"]["total"] > 0 and data["host"]["held"]["source"]
    assert isinstance(data["mismatches"], list) and data["simulated"] is False


def test_devices_follow_the_environment() -> None:
    proc = _run("--devices", env={"VRAMCHAT_DEVICES": "12GiB/2GiB,ram=32GiB"})
    assert proc.returncode == 0, proc.stderr
    assert "simulated" in proc.stdout and "CUDA0" in proc.stdout
    assert "2.00 GiB held by others: simulated" in proc.stdout
    assert "32.00 GiB available of 32.00 GiB" in proc.stdout


def test_bad_environment_is_a_usage_error_without_traceback() -> None:
    for args in (("--devices",), ("--plan", "missing.gguf")):
        proc = _run(*args, env={"VRAMCHAT_DEVICES": "12 potatoes"})
        assert proc.returncode == 2
        assert "VRAMCHAT_DEVICES" in proc.stderr and "Traceback" not in proc.stderr


def test_plan_json_shows_memory_held_by_others(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "6GiB/2GiB,ram=16GiB/3GiB")
    assert main(["--plan", str(zoo["llama-f16"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (gpu,) = data["devices"]
    assert gpu["free"] == 4 * GiB  # the plan uses free memory, not total
    assert (gpu["held_by_others"], gpu["held_by_others_source"]) == (2 * GiB, "simulated")
    assert data["host"]["held_by_others"] == 3 * GiB and data["host"]["free"] == 13 * GiB
    assert data["gpu_mismatch"] == [] and data["simulated_devices"] is True


def test_plan_table_shows_memory_held_by_others(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "6GiB/2GiB,ram=16GiB/3GiB")
    assert main(["--plan", str(zoo["llama-f16"])]) == 0
    out = capsys.readouterr().out
    section = out[out.index("Held by other processes") :]
    assert "CUDA0" in section and "2.00 GiB  (simulated)" in section
    assert "host RAM" in section and "3.00 GiB" in section


def _cpu_build_with_nvidia_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    install_llama_devices(monkeypatch, [cpu_device()])
    install_nvml(monkeypatch, fake_pynvml([FakeNvidia()]))
    install_rocml(monkeypatch, None)


def test_plan_json_carries_the_mismatch_and_its_command(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _cpu_build_with_nvidia_gpu(monkeypatch)
    assert main(["--plan", str(zoo["llama-f16"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (m,) = data["gpu_mismatch"]
    assert m["gpu"] == "NVIDIA GeForce RTX 4090" and m["backend"] == "cuda" and m["seen_by"] == "NVML"
    assert m["command"] == (
        'CMAKE_ARGS="-DGGML_CUDA=on -DGGML_RPC=on" pip install --force-reinstall --no-cache-dir '
        "llama-cpp-python==0.3.36"
    )
    assert data["verdict"] == "cpu_only" and m["command"] in data["warnings"][0]


def test_plan_table_carries_the_mismatch_and_its_command(
    zoo: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _cpu_build_with_nvidia_gpu(monkeypatch)
    assert main(["--plan", str(zoo["llama-f16"])]) == 0
    out = capsys.readouterr().out
    assert "Warning: NVIDIA GeForce RTX 4090 is present, but this llama-cpp-python was built without CUDA" in out
    assert 'CMAKE_ARGS="-DGGML_CUDA=on -DGGML_RPC=on" pip install --force-reinstall' in out


def test_devices_text_carries_the_mismatch(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _cpu_build_with_nvidia_gpu(monkeypatch)
    assert main(["--devices"]) == 0
    out = capsys.readouterr().out
    assert "ok NVML" in out and "NVIDIA GeForce RTX 4090: 24.00 GiB free" in out
    assert "-DGGML_CUDA=on" in out
    assert main(["--devices", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mismatches"][0]["backend"] == "cuda"
