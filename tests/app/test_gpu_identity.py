"""Who each GPU is (SMs, threads per SM, compute capability, driver), read without a CUDA context.

libcuda is stood in for by an object answering the driver API's calls as ctypes makes them (results
written through the pointers passed); the join to llama.cpp's devices is by PCI bus id.
"""

from __future__ import annotations

import ctypes

import pytest

from app.devices import cuda_driver, identity
from app.devices.ggml import GGMLDevice
from planner.hardware import GiB


class FakeLibcuda:
    """cuInit, cuDriverGetVersion, cuDeviceGetCount / Get / GetAttribute / GetName / GetPCIBusId; any other
    call (cuCtxCreate, cuDevicePrimaryCtxRetain ...) raises AttributeError: reading makes no context."""

    def __init__(self, gpus: list[dict], fail_init: int = 0) -> None:
        self.gpus = gpus
        self.fail_init = fail_init

    def cuInit(self, flags: int) -> int:
        return self.fail_init

    def cuDriverGetVersion(self, out) -> int:
        out._obj.value = 13000
        return 0

    def cuDeviceGetCount(self, out) -> int:
        out._obj.value = len(self.gpus)
        return 0

    def cuDeviceGet(self, out, index: int) -> int:
        out._obj.value = index
        return 0

    def cuDeviceGetAttribute(self, out, which: int, dev) -> int:
        gpu = self.gpus[dev.value]
        out._obj.value = {
            cuda_driver.MULTIPROCESSOR_COUNT: gpu["sms"],
            cuda_driver.MAX_THREADS_PER_MULTIPROCESSOR: gpu["threads"],
            cuda_driver.COMPUTE_CAPABILITY_MAJOR: gpu["cc"][0],
            cuda_driver.COMPUTE_CAPABILITY_MINOR: gpu["cc"][1],
            cuda_driver.INTEGRATED: 0,
        }[which]
        return 0

    def cuDeviceGetName(self, buf, size: int, dev) -> int:
        ctypes.memmove(buf, self.gpus[dev.value]["name"].encode() + b"\0", len(self.gpus[dev.value]["name"]) + 1)
        return 0

    def cuDeviceGetPCIBusId(self, buf, size: int, dev) -> int:
        bus = self.gpus[dev.value]["bus"].encode() + b"\0"
        ctypes.memmove(buf, bus, len(bus))
        return 0


GPUS = [
    {"name": "NVIDIA GeForce RTX 4090", "sms": 128, "threads": 1536, "cc": (8, 9), "bus": "0000:41:00.0"},
    {"name": "NVIDIA GeForce RTX 3060", "sms": 28, "threads": 1536, "cc": (8, 6), "bus": "0000:01:00.0"},
]


def test_the_driver_api_gives_each_gpus_attributes() -> None:
    devices = cuda_driver.read_devices(FakeLibcuda(GPUS))  # type: ignore[arg-type]
    assert [(d.name, d.sm_count, d.threads_per_sm, d.compute_capability, d.pci_bus_id) for d in devices] == [
        ("NVIDIA GeForce RTX 4090", 128, 1536, "8.9", "0000:41:00.0"),
        ("NVIDIA GeForce RTX 3060", 28, 1536, "8.6", "0000:01:00.0"),
    ]
    assert devices[0].driver == "CUDA 13.0"
    with pytest.raises(OSError, match="cuInit failed"):
        cuda_driver.read_devices(FakeLibcuda(GPUS, fail_init=100))  # type: ignore[arg-type]


def test_llama_cpps_devices_are_joined_by_pci_id_not_by_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA orders by speed: CUDA0 is the 4090 at 41:00.0, while the driver lists the 3060 first here
    monkeypatch.setattr(identity, "_cuda", lambda: tuple(cuda_driver.read_devices(FakeLibcuda(GPUS[::-1]))))  # type: ignore[arg-type]
    monkeypatch.setattr(identity, "_nvidia_driver", lambda: "580.95.05")
    monkeypatch.setattr(identity, "_amd", lambda: ())
    llama = [
        GGMLDevice("CUDA0", "NVIDIA GeForce RTX 4090", "gpu", 23 * GiB, 24 * GiB, "0000:41:00.0"),
        GGMLDevice("CUDA1", "NVIDIA GeForce RTX 3060", "gpu", 11 * GiB, 12 * GiB, "0000:01:00.0"),
        GGMLDevice("CPU", "CPU", "cpu", 64 * GiB, 64 * GiB),
    ]
    joined = identity.enrich(llama)
    assert [(d.name, d.sm_count, d.compute_capability) for d in joined] == [
        ("CUDA0", 128, "8.9"),
        ("CUDA1", 28, "8.6"),
        ("CPU", None, None),
    ]
    assert joined[0].driver == "580.95.05 (CUDA 13.0)"


def test_no_driver_leaves_the_devices_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_driver() -> list[cuda_driver.CudaDevice]:
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(cuda_driver, "read_devices", no_driver)
    identity._cuda.cache_clear()
    monkeypatch.setattr(identity, "_amd", lambda: ())
    try:
        device = GGMLDevice("CUDA0", "NVIDIA GeForce RTX 4090", "gpu", 23 * GiB, 24 * GiB, "0000:41:00.0")
        assert identity.enrich([device]) == [device]
    finally:
        identity._cuda.cache_clear()
