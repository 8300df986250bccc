"""Speed on a Vulkan device says what it is based on: a mat-vec timed on the device, measured once per machine,
or why there is no figure (app/speed/vulkan_basis.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.speed import gpu_speeds, vulkan_basis
from planner.hardware import Device, GiB


def _vulkan0() -> Device:
    return Device("Vulkan0", "gpu", "vulkan", 2 * GiB, 2 * GiB, description="llvmpipe (LLVM 15.0.6, 256 bits)")


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """What the device probe answers, one per call (the real probe runs in the Vulkan tier)."""
    answers: list[dict[str, Any]] = []
    monkeypatch.setattr(vulkan_basis, "run_device_probe", lambda d: answers[0])
    vulkan_basis.forget()
    yield answers
    vulkan_basis.forget()


def test_a_vulkan_device_is_timed_once_and_its_figure_says_so(probes: list[dict[str, Any]]) -> None:
    probes.append({"bandwidth": 2.5e9, "bytes": 64 << 20, "seconds": 0.027})
    speed = gpu_speeds([_vulkan0()])["Vulkan0"]
    assert speed.bandwidth == 2.5e9
    assert speed.source.startswith("measured on Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits)): one 64 MiB F16 mat-vec")
    assert "2.50 GB/s" in speed.source
    vulkan_basis.forget()  # a new process: the figure is read from the speed folder, not measured again
    probes[0] = {"error": "must not run again"}
    assert gpu_speeds([_vulkan0()])["Vulkan0"] == speed


def test_a_probe_that_fails_says_why(probes: list[dict[str, Any]]) -> None:
    probes.append({"error": "the device probe failed: Vulkan0 could not be started"})
    speed = gpu_speeds([_vulkan0()])["Vulkan0"]
    assert speed.bandwidth is None
    assert speed.source == (
        "no memory bandwidth reported for Vulkan0 (vulkan), and timing one failed: the device probe failed: "
        "Vulkan0 could not be started"
    )


def test_a_probe_taken_while_the_cpus_were_busy_is_not_kept_and_the_speed_says_measuring(
    probes: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, zoo: dict[str, Any]
) -> None:
    """lavapipe runs on the CPU: under two busy loops its mat-vec read 0.22 GB/s, quiet 1.43."""
    from app.speed import file_speed
    from planner.anatomy import load_anatomy
    from planner.fit import evaluate, fixed_config
    from planner.gguf import read_gguf
    from planner.hardware import Host
    from planner.speed import token_cost

    probes.append({"bandwidth": 0.22e9, "bytes": 64 << 20, "seconds": 0.3, "load": 0.92})
    device = _vulkan0()
    speed = gpu_speeds([device])["Vulkan0"]
    assert speed.bandwidth is None
    busy = "the machine was busy (other programs used 92% of the CPUs)"
    assert speed.pending == f"Vulkan0: speed not yet measured: {busy}"

    model = load_anatomy(read_gguf(zoo["llama-q8_0"]))
    plan = evaluate(model, fixed_config(model, [device], n_gpu_layers=99), [device], Host(8 * GiB, 8 * GiB)).plan
    prediction = file_speed(token_cost(plan), str(zoo["llama-q8_0"]), "devices", "config", [device])
    assert prediction.measuring and prediction.cell() == "measuring…"
    assert prediction.line() == f"Speed: measuring… ({speed.pending})"

    # not kept: a later plan (after the retry pause) measures again, and a quiet probe is kept
    probes[0] = {"bandwidth": 1.43e9, "bytes": 64 << 20, "seconds": 0.047, "load": 0.03}
    assert gpu_speeds([device])["Vulkan0"] == speed  # within the pause: not asked again
    monkeypatch.setattr(vulkan_basis.time, "monotonic", lambda: float("inf"))
    quiet = gpu_speeds([device])["Vulkan0"]
    assert quiet.bandwidth == 1.43e9 and quiet.measured and not quiet.pending
    vulkan_basis.forget()
    probes[0] = {"error": "must not run again"}
    assert gpu_speeds([device])["Vulkan0"] == quiet
