"""Every backend's free memory as a load will find it: simulated readings, fake sysfs trees.

No machine here has these GPUs: the amdgpu driver's files are written into a temporary tree laid out
as the kernel lays them out, NVML and llama.cpp's device list are stood in for, and the platform
(Windows, WSL2) is passed in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devices import amd_sysfs, probe_devices
from app.devices.free_memory import reconcile, wired_limit_advice
from app.devices.ggml import GGMLDevice
from app.devices.nvml import NvmlGpu
from planner.hardware import Device, GiB, Host, MiB
from tests.support.fake_gpus import cpu_device, install_llama_devices, install_nvml, install_rocml

HOST = Host(64 * GiB, 48 * GiB)


def write_amd_card(
    root: Path,
    card: int,
    bus: str,
    vram_total: int,
    vram_used: int,
    gtt_total: int = 16 * GiB,
    gfx_version: int = 110000,
    simd_count: int = 192,
    cpu_cores: int = 0,
) -> None:
    """One AMD GPU as the amdgpu driver and the KFD topology show it in sysfs."""
    device = root / f"sys/class/drm/card{card}/device"
    device.mkdir(parents=True)
    (device / "vendor").write_text("0x1002\n")
    (device / "uevent").write_text(f"DRIVER=amdgpu\nPCI_SLOT_NAME={bus}\n")
    for name, value in (
        ("mem_info_vram_total", vram_total),
        ("mem_info_vram_used", vram_used),
        ("mem_info_gtt_total", gtt_total),
        ("mem_info_gtt_used", 64 * MiB),
    ):
        (device / name).write_text(f"{value}\n")
    (root / f"sys/class/drm/card{card}-DP-1").mkdir(parents=True)  # a connector: not a card
    domain, rest = bus.split(":", 1)
    bus_no, slot = rest.split(":")
    dev, fn = slot.split(".")
    location = (int(bus_no, 16) << 8) | (int(dev, 16) << 3) | int(fn)
    node = root / f"sys/class/kfd/kfd/topology/nodes/{card + 1}"
    node.mkdir(parents=True)
    (node / "properties").write_text(
        f"cpu_cores_count {cpu_cores}\nsimd_count {simd_count}\nsimd_per_cu 2\n"
        f"gfx_target_version {gfx_version}\nlocation_id {location}\ndomain {int(domain, 16)}\n"
    )
    cpu = root / "sys/class/kfd/kfd/topology/nodes/0"
    cpu.mkdir(parents=True, exist_ok=True)
    (cpu / "properties").write_text("cpu_cores_count 16\nsimd_count 0\n")
    (root / "sys/module/amdgpu").mkdir(parents=True, exist_ok=True)
    (root / "sys/module/amdgpu/version").write_text("6.10.5\n")


def test_sysfs_names_the_gfx_target_and_compute_units(tmp_path: Path) -> None:
    write_amd_card(tmp_path, 0, "0000:03:00.0", 24 * GiB, 1 * GiB)
    write_amd_card(tmp_path, 1, "0000:0c:00.0", 64 * GiB, 0, gfx_version=90010, simd_count=416)
    gpus = amd_sysfs.read_gpus(tmp_path)
    assert [(g.pci_bus_id, g.gfx_target, g.cu_count) for g in gpus] == [
        ("0000:03:00.0", "gfx1100", 96),
        ("0000:0c:00.0", "gfx90a", 208),
    ]
    assert gpus[0].vram_free == 23 * GiB and gpus[0].driver == "amdgpu 6.10.5" and not gpus[0].apu
    assert amd_sysfs.read_gpus(tmp_path / "nowhere") == []


def test_rocm_free_memory_counts_what_hipmeminfo_misses(tmp_path: Path) -> None:
    # llama.cpp (hipMemGetInfo) sees 23.5 GiB free; the driver knows the desktop holds 700 MiB more
    write_amd_card(tmp_path, 0, "0000:03:00.0", 24 * GiB, 1200 * MiB)
    device = Device("ROCm0", "gpu", "rocm", 24 * GiB, 24 * GiB - 500 * MiB)
    gpus, notes = reconcile([device], {"ROCm0": "0000:03:00.0"}, [], amd_sysfs.read_gpus(tmp_path), HOST)
    assert gpus[0].free == 24 * GiB - 1200 * MiB
    assert "hipMemGetInfo misses" in notes[0] and "700.0 MiB" in notes[0]
    # within the noise: left alone, nothing said
    same, quiet = reconcile(
        [device], {"ROCm0": "0000:03:00.0"}, [], [amd_sysfs.AmdGpu("0000:03:00.0", 24 * GiB, 520 * MiB, 0, 0)], HOST
    )
    assert same[0].free == device.free and quiet == []


def test_an_apu_is_one_pool_with_host_ram(tmp_path: Path) -> None:
    # a 512 MiB carve-out, the rest through GTT; KFD puts its CPU cores and SIMDs in one node
    write_amd_card(tmp_path, 0, "0000:c4:00.0", 512 * MiB, 100 * MiB, 60 * GiB, 110501, 80, cpu_cores=16)
    apu = amd_sysfs.read_gpus(tmp_path)[0]
    assert apu.apu and apu.gfx_target == "gfx1151"
    # ROCm 6.4 reports GTT as its memory, and more free than total
    device = Device("ROCm0", "gpu", "rocm", 60 * GiB, 62 * GiB)
    gpus, notes = reconcile([device], {"ROCm0": "0000:c4:00.0"}, [], [apu], HOST)
    assert gpus[0].unified and gpus[0].free == HOST.free
    assert any("one pool with the host" in n for n in notes)


def test_vulkan_budget_is_compared_with_nvml_and_known_wrong_reports_named() -> None:
    nv = NvmlGpu(0, "NVIDIA GeForce RTX 4090", 24 * GiB, 20 * GiB, 4 * GiB, "00000000:01:00.0")
    device = Device("Vulkan0", "gpu", "vulkan", 24 * GiB, 23 * GiB, description="NVIDIA GeForce RTX 4090")
    bus = {"Vulkan0": "0000:01:00.0"}
    gpus, notes = reconcile([device], bus, [nv], [], HOST, platform="linux", wsl=False)
    assert gpus[0].free == 20 * GiB and "planned with NVML's" in notes[0]
    _, windows = reconcile([device], bus, [nv], [], HOST, platform="win32", wsl=False)
    assert any("total less 768 MiB" in n for n in windows)
    intel = Device("Vulkan0", "gpu", "vulkan", 16 * GiB, 12 * GiB, description="Intel(R) Arc(TM) Graphics")
    assert "wrong memory budget" in reconcile([intel], {}, [], [], HOST, platform="win32", wsl=False)[1][0]
    no_budget = Device("Vulkan0", "gpu", "vulkan", 8 * GiB, 8 * GiB, description="AMD Radeon RX 6600")
    assert "no VK_EXT_memory_budget" in reconcile([no_budget], {}, [], [], HOST, platform="linux", wsl=False)[1][0]


def test_windows_and_wsl_say_what_stands_in_for_nvmls_process_figures() -> None:
    device = Device("CUDA0", "gpu", "cuda", 12 * GiB, 10 * GiB)
    _, windows = reconcile([device], {}, [], [], HOST, platform="win32", wsl=False)
    assert "WDDM budget" in windows[0] and "shared system memory" in windows[0]
    _, wsl = reconcile([device], {}, [], [], HOST, platform="linux", wsl=True)
    assert "WSL2: NVML lists no processes" in wsl[0]
    hidden = NvmlGpu(0, "RTX", 12 * GiB, 10 * GiB, 2 * GiB, "00000000:01:00.0", processes_known=False)
    _, container = reconcile([device], {"CUDA0": "0000:01:00.0"}, [hidden], [], HOST, platform="linux", wsl=False)
    assert "NVML lists no processes here" in container[0]
    _, linux = reconcile([device], {}, [], [], HOST, platform="linux", wsl=False)
    assert linux == []


def test_metal_working_set_and_the_wired_limit_advice() -> None:
    mac = Host(64 * GiB, 60 * GiB)
    metal = Device("MTL0", "gpu", "metal", 48 * GiB, 48 * GiB, unified=True)
    _, notes = reconcile([metal], {}, [], [], mac, platform="darwin", wsl=False)
    assert "recommended working set, 48.00 GiB of 64.00 GiB" in notes[0] and "iogpu.wired_limit_mb" in notes[0]
    advice = wired_limit_advice(metal, 52 * GiB, 64 * GiB)
    assert advice is not None and "sudo sysctl iogpu.wired_limit_mb=53248" in advice
    assert wired_limit_advice(metal, 47 * GiB, 64 * GiB) is None  # fits the working set already
    assert wired_limit_advice(metal, 60 * GiB, 64 * GiB) is None  # would leave macOS too little
    cuda = Device("CUDA0", "gpu", "cuda", 8 * GiB, 8 * GiB)
    assert wired_limit_advice(cuda, 9 * GiB, 64 * GiB) is None


def test_the_probe_joins_sysfs_to_llama_cpps_rocm_device(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    write_amd_card(tmp_path, 0, "0000:03:00.0", 24 * GiB, 2 * GiB)
    real = amd_sysfs.read_gpus
    monkeypatch.setattr(amd_sysfs, "read_gpus", lambda root="/": real(tmp_path))
    install_nvml(monkeypatch, None)
    install_rocml(monkeypatch, None)
    rocm = GGMLDevice("ROCm0", "Radeon RX 7900 XTX", "gpu", 23 * GiB, 24 * GiB, "0000:03:00.0")
    install_llama_devices(monkeypatch, [rocm, cpu_device()])
    report = probe_devices()
    assert report.gpus[0].free == 22 * GiB
    assert any(p.name == "amdgpu (sysfs)" and "gfx1100" in p.detail for p in report.probes)
    assert any("hipMemGetInfo misses" in n for n in report.notes)
