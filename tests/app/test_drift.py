"""The drift alarm's rule: plan against use, per device, with the tolerance and Windows' spill."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from app.devices import probe_devices
from app.devices.live import GpuMemoryReader
from app.telemetry.drift import DriftWatch, tolerance
from planner.anatomy import load_anatomy
from planner.elastic import committed_plan
from planner.fit import evaluate, fixed_config
from planner.gguf import read_gguf
from planner.hardware import GiB, MiB


@pytest.fixture(scope="module")
def demo(gemma_path: Path):
    return load_anatomy(read_gguf(str(gemma_path)))


def _sample(devices: dict[str, tuple[int, int]]) -> SimpleNamespace:
    return SimpleNamespace(devices=devices)


def test_a_simulated_gpu_follows_the_context_held_now_and_raises_nothing(demo) -> None:
    report = probe_devices("8GiB/1GiB")
    config = fixed_config(demo, report.gpus, n_gpu_layers=demo.n_layer + 1, n_ctx=32768, flash_attn=False)
    plan = evaluate(demo, config, report.gpus, report.host).plan
    committed = committed_plan(plan, 4096, report.gpus, report.host)
    assert plan.gpus[0].planned - committed.gpus[0].planned > tolerance(committed.gpus[0].planned)
    reader = GpuMemoryReader(report, plan, lambda: True, lambda: committed)
    watch = DriftWatch(report.gpus, lambda: committed)
    assert reader()["CUDA0"][0] == 1 * GiB + committed.gpus[0].planned
    assert watch.check(_sample(reader())) == []


def test_tolerance_then_the_likely_cause(demo) -> None:
    report = probe_devices("8GiB/1GiB")
    for flash_attn, cause in ((False, "memory pool growing"), (True, "beyond the derived figure")):
        config = fixed_config(demo, report.gpus, n_gpu_layers=demo.n_layer + 1, n_ctx=4096, flash_attn=flash_attn)
        plan = evaluate(demo, config, report.gpus, report.host).plan
        expected = 1 * GiB + plan.gpus[0].planned
        watch = DriftWatch(report.gpus, lambda plan=plan: plan, platform="linux")
        assert watch.check(_sample({"CUDA0": (expected + 60 * MiB, 8 * GiB)})) == []  # within 64 MiB
        (alarm,) = watch.check(_sample({"CUDA0": (expected + 100 * MiB, 8 * GiB)}))
        assert cause in alarm.line and not alarm.recorded and alarm.line.endswith(".")


def test_windows_spilling_to_shared_memory(demo) -> None:
    report = probe_devices("8GiB/1GiB")
    config = fixed_config(demo, report.gpus, n_gpu_layers=demo.n_layer + 1, n_ctx=4096, flash_attn=True)
    plan = evaluate(demo, config, report.gpus, report.host).plan
    told = []
    watch = DriftWatch(report.gpus, lambda: plan, lambda *a: (True, None), told.append, platform="win32")
    (alarm,) = watch.check(_sample({"CUDA0": (8 * GiB - 10 * MiB, 8 * GiB)}))
    assert alarm.spill and "shared system memory" in alarm.line and "Sysmem Fallback" in alarm.line
    assert alarm.recorded and told == [alarm]
    linux = DriftWatch(report.gpus, lambda: plan, platform="linux")
    assert linux.check(_sample({"CUDA0": (1 * GiB + plan.gpus[0].planned, 8 * GiB)})) == []


def test_free_is_compared_with_free_not_total_with_total(demo) -> None:
    """The probe's total is CUDA's (81,079 MiB on our H100), the telemetry's NVML's (81,559 MiB, with the
    driver's reserve): the 480 MiB between them is no drift."""
    from dataclasses import replace

    report = probe_devices("80GiB")
    device = replace(report.gpus[0], total=81079 * MiB, free=80000 * MiB)
    config = fixed_config(demo, [device], n_gpu_layers=demo.n_layer + 1, n_ctx=4096, flash_attn=True)
    plan = evaluate(demo, config, [device], report.host).plan
    watch = DriftWatch([device], lambda: plan, platform="linux")
    nvml_total = 81559 * MiB
    free_now = 80000 * MiB - plan.gpus[0].planned
    assert watch.check(_sample({"CUDA0": (nvml_total - free_now, nvml_total)})) == []
    (alarm,) = watch.check(_sample({"CUDA0": (nvml_total - free_now + 200 * MiB, nvml_total)}))
    assert alarm.excess == 200 * MiB


def test_a_device_read_from_llama_cpps_allocations_is_held_to_the_plans_buffers(demo) -> None:
    """Vulkan (lavapipe) reports no free memory: the telemetry reads what llama.cpp allocated there (`unread`).
    The watch holds that to the plan's buffers, the overhead estimate left out (no allocation shows it), and
    says once what it cannot see."""
    report = probe_devices("8GiB/1GiB")
    config = fixed_config(demo, report.gpus, n_gpu_layers=demo.n_layer + 1, n_ctx=4096, flash_attn=True)
    plan = evaluate(demo, config, report.gpus, report.host).plan
    buffers = plan.gpus[0].planned - plan.gpus[0].overhead
    assert plan.gpus[0].overhead > 100 * MiB
    notes: list[str] = []
    recorded: list[str] = []
    watch = DriftWatch(report.gpus, lambda: plan, lambda name, *a: (recorded.append(name), None), on_note=notes.append)

    def sample(allocated: int) -> SimpleNamespace:
        return SimpleNamespace(devices={"CUDA0": (1 * GiB + allocated, 8 * GiB)}, unread=frozenset({"CUDA0"}))

    assert watch.check(sample(buffers)) == [] and watch.check(sample(buffers + 60 * MiB)) == []
    assert notes == [
        "CUDA0 reports no free memory: the drift alarm compares what llama.cpp allocated there with the plan's "
        "buffers, and cannot see memory other programs take on it."
    ]
    (alarm,) = watch.check(sample(buffers + 100 * MiB))  # still less than the plan with its overhead estimate
    assert alarm.planned == buffers and alarm.excess == 100 * MiB and not alarm.recorded and recorded == []
    assert "a buffer the planner does not price" in alarm.line
