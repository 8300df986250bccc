"""The overhead learned on this machine: device readings fed through the learning path.

The GPU is an RTX 4060 as a machine with one would report it (llama.cpp's device list and NVML,
stood in for by tests/support/fake_gpus.py), loaded through the app's ModelSession with an engine
that reports the plan's buffers on the GPU. What NVML says the engine process holds is set before
each step, as a real driver would report it; the plan made next must follow.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from app.conversation.reply import OK, write_reply
from app.conversation.templates import ChatMessage
from app.devices import learned_overhead, probe_devices
from app.devices.ggml import GGMLDevice
from app.devices.learned_overhead import LearnedStore, failure_readings, learn_after_load
from app.devices.render import devices_text
from app.engine import GenerationParams, Measurements
from app.session import ModelSession
from app.telemetry.drift import DriftWatch
from planner.anatomy import load_anatomy
from planner.fit import FitResult, evaluate, fixed_config
from planner.gguf import read_gguf
from planner.gpu_overhead import on_pages
from planner.hardware import GiB, MiB
from tests.support.fake_engine import FakeEngine
from tests.support.fake_gpus import FakeNvidia, cpu_device, fake_pynvml, install_llama_devices, install_nvml

PID = 4242
BUS = "0000:01:00.0"


def rtx4060(free: int = 7 * GiB) -> GGMLDevice:
    return GGMLDevice(
        "CUDA0",
        "NVIDIA GeForce RTX 4060",
        "gpu",
        free,
        8 * GiB - 512 * MiB,
        BUS,
        sm_count=24,
        threads_per_sm=1536,
        compute_capability="8.9",
        driver="580.95 (CUDA 13.0)",
        card="NVIDIA GeForce RTX 4060",
    )


class GpuEngine(FakeEngine):
    """A fake engine process whose load reports the plan's buffers as llama.cpp logs them."""

    pid = PID

    def __init__(self, plan_buffers: dict[str, dict[str, int]]) -> None:
        super().__init__()
        self.plan_buffers = plan_buffers

    def measured(self, path, config) -> Measurements:
        return Measurements(**self.plan_buffers)  # the plan's, for the simulated GPU the test installed


@pytest.fixture
def nvidia(monkeypatch: pytest.MonkeyPatch) -> FakeNvidia:
    gpu = FakeNvidia("NVIDIA GeForce RTX 4060", 8 * GiB, 1 * GiB, "00000000:01:00.0")
    install_nvml(monkeypatch, fake_pynvml([gpu]))
    install_llama_devices(monkeypatch, [rtx4060(), cpu_device()])
    return gpu


@pytest.fixture(scope="module")
def demo(gemma_path: Path):
    return load_anatomy(read_gguf(str(gemma_path)))


def _plan(demo, report) -> FitResult:
    config = fixed_config(demo, report.gpus, n_gpu_layers=demo.n_layer + 1, n_ctx=4096, flash_attn=True)
    return evaluate(demo, config, report.gpus, report.host)


def _buffers(fit: FitResult) -> tuple[dict[str, dict[str, int]], int]:
    """The plan's buffers as llama.cpp's log would name them, and what they take on CUDA0 in pages."""
    kinds = {"weights": "model", "kv": "kv", "kv_swa": "kv_swa", "output": "output", "compute": "compute"}
    tables: dict[str, dict[str, int]] = {v: {} for v in kinds.values()}
    for b in fit.plan.buffers:
        if b.kind in kinds:
            table = tables[kinds[b.kind]]
            table[b.name] = table.get(b.name, 0) + b.bytes
    on_gpu = sum(on_pages(b.bytes) for b in fit.plan.buffers if b.device == "CUDA0")
    return tables, on_gpu


def _reply(session: ModelSession) -> None:
    outcome = write_reply(
        session,
        None,
        0,
        [ChatMessage("user", "hello")],
        "",
        GenerationParams(max_tokens=8),
        threading.Event(),
        on_fitted=lambda b: None,
        on_piece=lambda p: None,
    )
    assert outcome.kind == OK


def test_the_next_plan_uses_what_this_gpu_really_held(nvidia: FakeNvidia, demo, gemma_path: Path) -> None:
    report = probe_devices()
    gpu = report.gpus[0]
    assert (gpu.sm_count, gpu.compute_capability, gpu.learned) == (24, "8.9", None)
    first = _plan(demo, report)
    derived = first.plan.gpus[0].overhead_detail
    assert derived is not None and derived.source.startswith("CUDA context 83 MiB derived")

    tables, on_gpu = _buffers(first)
    session = ModelSession(lambda: GpuEngine(tables), verify=False, elastic=False)
    # after the load NVML sees the engine hold its buffers and 150 MiB beside them
    nvidia.compute = [(PID, on_gpu + 150 * MiB)]
    session.load(str(gemma_path), demo, first, report)
    assert session.learning is not None
    # after the first reply, 90 MiB more: the runtime (kernels, pool, CUDA graphs)
    nvidia.compute = [(PID, on_gpu + 240 * MiB)]
    _reply(session)
    nvidia.compute = [(PID, on_gpu + 400 * MiB)]
    _reply(session)  # only the first reply of a load is read
    session.close()

    second_report = probe_devices()
    learned = second_report.gpus[0].learned
    assert learned is not None
    assert (learned.context, learned.runtime_flash_attn, learned.loads, learned.replies) == (150 * MiB, 90 * MiB, 1, 1)
    second = _plan(demo, second_report).plan.gpus[0]
    assert second.overhead_detail is not None
    assert second.overhead_detail.source.startswith("learned on this GPU, 1 load, 1 reply")
    assert second.overhead_detail.total == 240 * MiB
    assert second.overhead != first.plan.gpus[0].overhead
    assert "learned on this GPU (1 load, 1 reply): context 150.0 MiB" in devices_text(second_report)

    # another load that took more: kept at its peak; one that took less changes nothing
    for held in (170 * MiB, 120 * MiB):
        nvidia.compute = [(PID, on_gpu + held)]
        session = ModelSession(lambda: GpuEngine(tables), verify=False, elastic=False)
        session.load(str(gemma_path), demo, first, second_report)
        session.close()
    learned = probe_devices().gpus[0].learned
    assert learned is not None and (learned.context, learned.loads) == (170 * MiB, 3)


def test_a_failed_load_and_a_drift_raise_it(nvidia: FakeNvidia, demo, gemma_path: Path) -> None:
    report = probe_devices()
    fit = _plan(demo, report)
    tables, on_gpu = _buffers(fit)
    nvidia.compute = [(PID, on_gpu + 100 * MiB)]
    session = ModelSession(lambda: GpuEngine(tables), verify=False, elastic=False)
    session.load(str(gemma_path), demo, fit, report)
    nvidia.compute = [(PID, on_gpu + 180 * MiB)]
    _reply(session)
    assert probe_devices().gpus[0].learned.runtime_flash_attn == 80 * MiB  # type: ignore[union-attr]

    # while the model runs, the device holds 300 MiB more than the plan, and NVML says the engine grew by
    # that much: the alarm records it
    drift = session.drift
    assert drift is not None
    planned = session.model.now.gpus[0].planned  # type: ignore[union-attr]
    others = report.gpus[0].total - report.gpus[0].free
    total = report.gpus[0].total

    def sample(used: int) -> object:
        return type("Sample", (), {"devices": {"CUDA0": (used, total)}})()

    nvidia.compute = [(PID, on_gpu + 480 * MiB)]
    alarms = drift.check(sample(others + planned + 300 * MiB))
    assert alarms and alarms[0].recorded and "more than planned" in alarms[0].line
    assert drift.check(sample(others + planned + 400 * MiB)) == []  # once per device and load
    session.close()
    learned = probe_devices().gpus[0].learned
    assert learned is not None and learned.raised_by == "a drift alarm"
    assert learned.runtime_flash_attn == 380 * MiB  # NVML's figure for the engine, less its buffers and context

    # another program takes 500 MiB while the engine holds what was learned: named, and nothing is raised
    nvidia.compute = [(PID, on_gpu + 100 * MiB)]
    session = ModelSession(lambda: GpuEngine(tables), verify=False, elastic=False)
    session.load(str(gemma_path), demo, fit, probe_devices())
    drift = session.drift
    assert drift is not None
    planned = session.model.now.gpus[0].planned  # type: ignore[union-attr]
    nvidia.compute = [(PID, on_gpu + 480 * MiB)]
    (alarm,) = drift.check(sample(others + planned + 500 * MiB))
    assert "another program took memory" in alarm.line and not alarm.recorded
    session.close()
    assert probe_devices().gpus[0].learned.runtime_flash_attn == 380 * MiB  # type: ignore[union-attr]

    # a load that ran out of memory on CUDA0 with 1 GiB free: the backend took at least what was left
    small = replace(report.gpus[0], free=1 * GiB)
    planned_buffers = {"CUDA0": on_gpu}
    LearnedStore().record(failure_readings([small], planned_buffers, ["CUDA0"]))
    learned = probe_devices().gpus[0].learned
    assert learned is not None and learned.context == 1 * GiB - on_gpu + 2 * MiB
    assert learned.raised_by == "a failed load"


def test_windows_style_readings_without_nvml_process_figures(monkeypatch: pytest.MonkeyPatch, demo) -> None:
    """Where NVML has no per-process figure (WDDM, WSL2), llama.cpp's free memory before and after counts."""
    gpu = FakeNvidia("NVIDIA GeForce RTX 4060", 8 * GiB, 1 * GiB, "00000000:01:00.0", process_lists_fail=True)
    install_nvml(monkeypatch, fake_pynvml([gpu]))
    install_llama_devices(monkeypatch, [rtx4060(), cpu_device()])
    report = probe_devices()
    fit = _plan(demo, report)
    tables, on_gpu = _buffers(fit)
    device = report.gpus[0]
    # llama.cpp now reports the buffers and 200 MiB less free than before the load
    install_llama_devices(monkeypatch, [rtx4060(free=device.free - on_gpu - 200 * MiB), cpu_device()])
    model = type("Loaded", (), {"now": fit.plan, "report": GpuEngine(tables).load("x", fit.plan.config)})()
    learning = learn_after_load(model, report.gpus, PID)
    assert learning is not None
    entry = next(iter(LearnedStore().entries().values()))
    assert entry.context == 200 * MiB and entry.source == learned_overhead.FROM_FREE


def test_simulated_and_what_if_devices_are_never_learned(demo, gemma_path: Path) -> None:
    report = probe_devices(gpu=["RTX 4060"])
    fit = _plan(demo, report)
    tables, _ = _buffers(fit)
    session = ModelSession(lambda: GpuEngine(tables), verify=False, elastic=False)
    session.load(str(gemma_path), demo, fit, report)
    session.close()
    assert session.learning is None and LearnedStore().entries() == {}


def test_forget_overhead_clears_what_was_learned(nvidia: FakeNvidia, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    device = probe_devices().gpus[0]
    LearnedStore().record([learned_overhead.Reading(device, learned_overhead.LOAD, 99 * MiB, False, "test")])
    assert probe_devices().gpus[0].learned is not None
    assert main(["--devices", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["gpus"][0]
    assert shown["learned_overhead"]["context"] == 99 * MiB and shown["identity"]["sm_count"] == 24
    assert main(["--forget-overhead"]) == 0
    assert "Forgot the overhead learned on 1 GPU: NVIDIA GeForce RTX 4060" in capsys.readouterr().out
    assert probe_devices().gpus[0].learned is None
    assert main(["--forget-overhead"]) == 0
    assert "Nothing learned to forget" in capsys.readouterr().out


def test_a_store_that_cannot_be_read_is_started_afresh(tmp_path: Path) -> None:
    path = tmp_path / "learned.json"
    path.write_text("{not json")
    assert LearnedStore(path).entries() == {}
    drift = DriftWatch([], lambda: None)
    assert drift.check(object()) == [] and drift.line == ""


def test_what_the_engine_holds_is_read_from_nvml_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """read_now matches NVML's GPU to llama.cpp's device by PCI bus id and reads the engine's own share
    (a lookup that fails is swallowed there, so a broken match would silently learn nothing)."""
    from app.devices import ggml, nvml

    device = GGMLDevice("CUDA0", "NVIDIA GeForce RTX 4060", "gpu", 6 << 30, 8 << 30, device_id="0000:01:00.0")
    card = nvml.NvmlGpu(
        0, "RTX 4060", 8 << 30, 6 << 30, 2 << 30, pci_bus_id="0000:01:00.0", processes={4242: 900 << 20}
    )
    monkeypatch.setattr(ggml, "last_devices", lambda: [device])
    monkeypatch.setattr(nvml, "list_gpus", lambda: [card])
    monkeypatch.setattr(ggml, "gpu_memory", lambda: {"CUDA0": (6 << 30, 8 << 30)})
    process, free = learned_overhead.read_now(4242)
    assert process == {"CUDA0": 900 << 20} and free == {"CUDA0": 6 << 30}
    assert learned_overhead.read_now(1)[0] == {}  # another process's memory is not the engine's
