"""The report probe_devices builds: GPUs matched across probes, memory held by others, the mismatch
between the GPUs a driver sees and those llama.cpp can use, Apple's unified memory."""

from __future__ import annotations

import os

import pytest

from app.devices import DeviceReport, held, host, mismatch_notice, probe_devices
from app.devices.ggml import GGMLDevice
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.gguf import read_gguf
from planner.hardware import Host
from planner.memory import plan_memory
from tests.support.fake_gpus import (
    FakeAmd,
    FakeNvidia,
    GiB,
    MiB,
    NVMLError_LibraryNotFound,
    cpu_device,
    fake_pynvml,
    fake_rocml,
    install_llama_devices,
    install_nvml,
    install_rocml,
)

ME = os.getpid()


def _cuda(i: int, bus: str | None, free: int = 20 * GiB, total: int = 24 * GiB) -> GGMLDevice:
    return GGMLDevice(f"CUDA{i}", "NVIDIA GeForce RTX 4090", "gpu", free, total, bus)


@pytest.fixture
def no_vendors(monkeypatch: pytest.MonkeyPatch) -> None:
    install_nvml(monkeypatch, fake_pynvml([], init_error=NVMLError_LibraryNotFound()))
    install_rocml(monkeypatch, None)


def _probe(
    monkeypatch: pytest.MonkeyPatch,
    llama: list[GGMLDevice],
    nvidia: list[FakeNvidia] | None = None,
    amd: list[FakeAmd] | None = None,
) -> DeviceReport:
    install_llama_devices(monkeypatch, llama)
    install_nvml(monkeypatch, fake_pynvml(nvidia or [], init_error=None if nvidia else NVMLError_LibraryNotFound()))
    install_rocml(monkeypatch, fake_rocml(amd) if amd else None)
    return probe_devices()


# -- the mismatch ------------------------------------------------------------------------------------


def test_nvidia_gpu_with_a_cpu_only_build_says_how_to_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _probe(monkeypatch, [cpu_device()], nvidia=[FakeNvidia()])
    assert report.gpus == []
    (m,) = report.mismatches
    assert (m.gpu, m.seen_by, m.backend) == ("NVIDIA GeForce RTX 4090", "NVML", "cuda")
    assert m.command == (
        'CMAKE_ARGS="-DGGML_CUDA=on -DGGML_RPC=on" pip install --force-reinstall --no-cache-dir '
        "llama-cpp-python==0.3.36"
    )
    assert m.command in report.warnings[0]
    notice = mismatch_notice(report)
    assert notice is not None and "NVIDIA GeForce RTX 4090" in notice and m.command in notice


def test_amd_gpu_with_a_cpu_only_build_gets_the_hip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _probe(monkeypatch, [cpu_device()], amd=[FakeAmd(), FakeAmd()])
    (m,) = report.mismatches
    assert m.backend == "rocm" and "-DGGML_HIP=on" in m.command
    assert m.gpu == "Radeon RX 7900 XTX (and 1 more)"


def test_apple_silicon_without_metal_gets_the_metal_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "read_host", lambda: host.HostMemory(32 * GiB, 20 * GiB, 0, 0, "Apple M2", True))
    report = _probe(monkeypatch, [cpu_device()])
    (m,) = report.mismatches
    assert m.backend == "metal" and "-DGGML_METAL=on" in m.command
    metal = report.probe("Metal")
    assert metal is not None and not metal.available and "built without Metal" in metal.detail


@pytest.mark.parametrize(
    "llama",
    [
        [_cuda(0, "0000:01:00.0"), cpu_device()],
        [GGMLDevice("Vulkan0", "NVIDIA GeForce RTX 4090", "gpu", 20 * GiB, 24 * GiB, "0000:01:00.0"), cpu_device()],
    ],
)
def test_no_mismatch_when_llama_cpp_can_drive_the_gpu(monkeypatch: pytest.MonkeyPatch, llama: list[GGMLDevice]) -> None:
    report = _probe(monkeypatch, llama, nvidia=[FakeNvidia()])
    assert report.mismatches == [] and report.warnings == [] and mismatch_notice(report) is None
    assert [g.name for g in report.gpus] == [llama[0].name]


def test_no_mismatch_claimed_when_llama_cpp_cannot_be_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    install_llama_devices(monkeypatch, OSError("no libggml"))
    install_nvml(monkeypatch, fake_pynvml([FakeNvidia()]))
    install_rocml(monkeypatch, None)
    report = probe_devices()
    assert report.mismatches == [] and report.probe("NVML").available


# -- memory held by others ------------------------------------------------------------------------


def test_held_by_others_comes_from_nvml_matched_by_bus_id(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA orders GPUs fastest first, NVML by bus: the lists disagree and the bus ids settle it
    llama = [_cuda(0, "0000:02:00.0", free=11 * GiB, total=12 * GiB), _cuda(1, "0000:01:00.0"), cpu_device()]
    nvidia = [
        FakeNvidia(used=4 * GiB, compute=[(ME, 1 * GiB), (4242, 3 * GiB)]),
        FakeNvidia(
            name="NVIDIA RTX A2000", total=12 * GiB, used=1 * GiB, bus_id="00000000:02:00.0", graphics=[(99, 700 * MiB)]
        ),
    ]
    report = _probe(monkeypatch, llama, nvidia=nvidia)
    assert report.held["CUDA1"] == held.HeldMemory(3 * GiB, held.FROM_PROCESSES, 1)
    assert report.held["CUDA0"] == held.HeldMemory(700 * MiB, held.FROM_PROCESSES, 1)
    assert report.held_by_others == {"CUDA0": 700 * MiB, "CUDA1": 3 * GiB}
    # the plan uses free memory as llama.cpp reports it, not total
    assert [(g.name, g.free) for g in report.gpus] == [("CUDA0", 11 * GiB), ("CUDA1", 20 * GiB)]


def test_devices_without_bus_ids_match_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    llama = [_cuda(0, None), _cuda(1, None), cpu_device()]
    nvidia = [FakeNvidia(compute=[(1, 1 * GiB)]), FakeNvidia(compute=[(2, 2 * GiB)], bus_id="00000000:02:00.0")]
    report = _probe(monkeypatch, llama, nvidia=nvidia)
    assert report.held_by_others == {"CUDA0": 1 * GiB, "CUDA1": 2 * GiB}


def test_held_falls_back_to_memory_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    llama = [
        _cuda(0, "0000:01:00.0", free=18 * GiB),
        GGMLDevice("ROCm0", "RX 7900", "gpu", 20 * GiB, 24 * GiB, "0000:03:00.0"),
        GGMLDevice("Vulkan0", "Arc", "gpu", 7 * GiB, 8 * GiB, "0000:09:00.0"),
        cpu_device(),
    ]
    report = _probe(monkeypatch, llama, amd=[FakeAmd(vram_used=4 * GiB)])
    assert report.held["CUDA0"] == held.HeldMemory(6 * GiB, held.FROM_DEVICE)  # no NVML here
    assert report.held["ROCm0"] == held.HeldMemory(4 * GiB, held.FROM_ROCM)
    assert report.held["Vulkan0"] == held.HeldMemory(1 * GiB, held.FROM_DEVICE)
    assert report.held["CPU"].source == held.FROM_HOST


def test_lost_nvidia_gpu_is_not_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _probe(
        monkeypatch, [_cuda(0, "0000:01:00.0", free=20 * GiB), cpu_device()], nvidia=[FakeNvidia(lost=True)]
    )
    assert report.held["CUDA0"] == held.HeldMemory(4 * GiB, held.FROM_DEVICE)


# -- Apple unified memory: one pool ---------------------------------------------------------------


def test_metal_shares_host_ram_and_is_counted_once(monkeypatch: pytest.MonkeyPatch, zoo) -> None:
    monkeypatch.setattr(host, "read_host", lambda: host.HostMemory(32 * GiB, 24 * GiB, 0, 0, "Apple M2", True))
    metal = GGMLDevice("MTL0", "Apple M2", "gpu", 21 * GiB, 21 * GiB)
    report = _probe(monkeypatch, [metal, cpu_device()])
    (gpu,) = report.gpus
    assert gpu.unified and gpu.backend == "metal" and report.mismatches == []
    probe = report.probe("Metal")
    assert probe is not None and probe.available and "working-set limit 21.00 GiB of 32.00 GiB" in probe.detail
    assert "MTL0" not in report.held  # what others hold there is host RAM, reported with the host

    model = load_anatomy(read_gguf(zoo["llama-f16"]))
    plan = plan_memory(model, LoadConfig(n_gpu_layers=99, n_ctx=1024), report.gpus, report.host)
    separate = plan_memory(
        model,
        LoadConfig(n_gpu_layers=99, n_ctx=1024),
        [gpu.__class__(**{**gpu.__dict__, "unified": False})],
        report.host,
    )
    # the GPU's buffers come out of the host's RAM too: the host has that much less to offer
    assert plan.host.shared == plan.gpus[0].planned > 0
    assert plan.host.available == separate.host.available - plan.gpus[0].planned


def test_a_discrete_metal_gpu_keeps_its_own_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # an Intel Mac: Metal drives a Radeon with VRAM of its own
    monkeypatch.setattr(host, "read_host", lambda: host.HostMemory(32 * GiB, 20 * GiB, 0, 0, "Intel Core i9", False))
    report = _probe(monkeypatch, [GGMLDevice("MTL0", "AMD Radeon Pro 5500M", "gpu", 8 * GiB, 8 * GiB), cpu_device()])
    assert not report.gpus[0].unified and report.mismatches == []
    probe = report.probe("Metal")
    assert probe is not None and probe.available and "discrete GPU" in probe.detail


def test_integrated_gpu_is_unified(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _probe(monkeypatch, [GGMLDevice("Vulkan0", "Radeon 780M", "igpu", 8 * GiB, 16 * GiB), cpu_device()])
    assert report.gpus[0].unified and "Vulkan0" not in report.held


def test_cpu_only_flag_keeps_the_findings(monkeypatch: pytest.MonkeyPatch, no_vendors: None) -> None:
    install_llama_devices(monkeypatch, [_cuda(0, "0000:01:00.0"), cpu_device()])
    report = probe_devices(cpu_only=True)
    assert report.gpus == [] and "CUDA0" in report.held


def test_ram_override_simulates_only_the_host(monkeypatch: pytest.MonkeyPatch, no_vendors: None) -> None:
    install_llama_devices(monkeypatch, [_cuda(0, "0000:01:00.0"), cpu_device()])
    report = probe_devices(ram="16GiB/4GiB")
    assert not report.simulated and [g.name for g in report.gpus] == ["CUDA0"]
    assert report.host == Host(16 * GiB, 12 * GiB, report.host.cpu_features, 0, simulated=True)
    assert report.held["CPU"] == held.HeldMemory(4 * GiB, held.SIMULATED)
