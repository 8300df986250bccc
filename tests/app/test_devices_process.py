"""This process's memory as psutil, NVML and llama.cpp's devices see it (the engine snapshots it around a load)."""

from __future__ import annotations

import os

import pytest

from app.devices import host, process
from app.devices.ggml import GGMLDevice
from tests.support.fake_gpus import (
    FakeNvidia,
    GiB,
    NVMLError_DriverNotLoaded,
    cpu_device,
    fake_pynvml,
    install_llama_devices,
    install_nvml,
)

ME = os.getpid()


def test_snapshot_on_this_machine() -> None:
    snap = process.snapshot()
    assert snap.rss > 0 and snap.sources["psutil"] == "ok" and snap.sources["llama.cpp"] == "ok"
    if not snap.device_used:  # no GPU here: nothing to ask NVML about
        assert snap.gpu == {} and snap.sources["NVML"].startswith("not asked")


def test_snapshot_maps_nvml_process_memory_to_llama_cpp_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    install_llama_devices(
        monkeypatch,
        [
            GGMLDevice("CUDA0", "RTX A2000", "gpu", 10 * GiB, 12 * GiB, "0000:02:00.0"),
            GGMLDevice("CUDA1", "RTX 4090", "gpu", 20 * GiB, 24 * GiB, "0000:01:00.0"),
            cpu_device(),
        ],
    )
    install_nvml(
        monkeypatch,
        fake_pynvml(
            [
                FakeNvidia(used=4 * GiB, compute=[(ME, 3 * GiB), (17, 1 * GiB)]),
                FakeNvidia(
                    name="RTX A2000", total=12 * GiB, used=2 * GiB, bus_id="00000000:02:00.0", compute=[(17, 2 * GiB)]
                ),
            ]
        ),
    )
    snap = process.snapshot(ME)
    assert snap.gpu == {"CUDA1": 3 * GiB}  # this process holds nothing on CUDA0
    assert snap.device_used == {"CUDA0": 2 * GiB, "CUDA1": 4 * GiB}
    assert snap.sources["NVML"] == "ok"


def test_snapshot_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(pid: int | None = None) -> int:
        raise OSError("no /proc")

    monkeypatch.setattr(host, "process_rss", broken)
    install_llama_devices(monkeypatch, [GGMLDevice("CUDA0", "RTX 4090", "gpu", 20 * GiB, 24 * GiB)])
    install_nvml(monkeypatch, fake_pynvml([], init_error=NVMLError_DriverNotLoaded()))
    snap = process.snapshot()
    assert snap.rss == 0 and snap.sources["psutil"] == "unavailable: no /proc"
    assert snap.sources["NVML"] == "unavailable: the NVIDIA driver is not loaded" and snap.gpu == {}
    assert snap.device_used == {"CUDA0": 4 * GiB}

    install_llama_devices(monkeypatch, RuntimeError("libggml gone"))
    snap = process.snapshot()
    assert snap.sources["llama.cpp"] == "unavailable: libggml gone" and snap.device_used == {}


def test_delta_prefers_the_process_figure() -> None:
    before = process.ProcessMemory(0.0, 100, {"CUDA0": 300}, {"CUDA0": 1000, "ROCm0": 50})
    after = process.ProcessMemory(1.0, 180, {"CUDA0": 900}, {"CUDA0": 2000, "ROCm0": 450})
    assert process.delta(before, after) == {"rss": 80, "CUDA0": 600, "ROCm0": 400}
