"""Device probes: llama.cpp's devices, NVML, pyrsmi, host; each one's failure paths and success paths."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from app import native
from app.devices import ggml, host, nvml, pci, probe_devices, rocm
from app.devices.ggml import GGMLDevice
from tests.support.fake_gpus import (
    FakeAmd,
    FakeNvidia,
    GiB,
    MiB,
    NVMLError,
    NVMLError_DriverNotLoaded,
    NVMLError_LibraryNotFound,
    ROCMLError_LibraryNotFound,
    cpu_device,
    fake_pynvml,
    fake_rocml,
    install_llama_devices,
    install_nvml,
    install_rocml,
)

ME = os.getpid()


@pytest.fixture
def reload_ggml():
    """Forget the loaded libggml before and after a test that points it elsewhere."""
    native.libraries.cache_clear()
    yield
    native.libraries.cache_clear()


# -- llama.cpp's own devices (the real libggml of llama-cpp-python) -------------------------------


def test_llama_cpp_lists_the_cpu_device_with_host_memory() -> None:
    devices = ggml.list_devices()
    cpu = [d for d in devices if d.type == "cpu"]
    assert cpu and cpu[0].name == "CPU" and cpu[0].backend == "cpu"
    assert cpu[0].total == psutil.virtual_memory().total
    assert cpu[0].device_id is None
    # the telemetry's cheap read covers exactly the GPUs of the full listing
    assert set(ggml.gpu_memory()) == {d.name for d in devices if d.is_gpu}


def test_llama_cpp_missing_library_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reload_ggml: None
) -> None:
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path))
    with pytest.raises(ggml.GGMLUnavailable, match="cannot load libggml"):
        ggml.list_devices()
    report = probe_devices()
    probe = report.probe("llama.cpp")
    assert probe is not None and not probe.available and "cannot load libggml" in probe.detail
    # the others went on, and nothing is claimed about a build that could not be asked
    assert report.probe("host").available and report.host.total > 0
    assert report.gpus == [] and report.mismatches == []


def test_llama_cpp_not_installed(monkeypatch: pytest.MonkeyPatch, reload_ggml: None) -> None:
    monkeypatch.delenv("LLAMA_CPP_LIB_PATH", raising=False)
    monkeypatch.setattr(native.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ggml.GGMLUnavailable, match="not installed"):
        ggml.list_devices()


def test_llama_cpp_probe_failing_mid_run_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    install_llama_devices(monkeypatch, OSError("device vanished"))
    probe = probe_devices().probe("llama.cpp")
    assert probe is not None and probe.detail == "unavailable: device vanished"


@pytest.mark.parametrize(
    "name, type_, backend",
    [
        ("CUDA0", "gpu", "cuda"),
        ("ROCm1", "gpu", "rocm"),
        ("MTL0", "gpu", "metal"),
        ("Vulkan0", "igpu", "vulkan"),
        ("CPU", "cpu", "cpu"),
        ("SYCL0", "gpu", "sycl"),
        ("Foo0", "gpu", "unknown"),
    ],
)
def test_backend_from_device_name(name: str, type_: str, backend: str) -> None:
    assert GGMLDevice(name, "", type_, 0, 0).backend == backend


def test_unknown_gpu_backend_is_planned_with_borrowed_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    install_llama_devices(monkeypatch, [GGMLDevice("SYCL0", "Arc A770", "gpu", 15 * GiB, 16 * GiB), cpu_device()])
    install_nvml(monkeypatch, None)
    install_rocml(monkeypatch, None)
    report = probe_devices()
    (gpu,) = report.gpus
    assert gpu.backend == "vulkan"
    assert any("no buffer rules for the sycl backend" in w for w in report.warnings)


# -- PCI bus ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("00000000:01:00.0", "0000:01:00.0"),
        (b"00000000:C1:00.0", "0000:c1:00.0"),
        ("0000:c1:00.0", "0000:c1:00.0"),
        ("01:00.0", "0000:01:00.0"),
        ("0000:01:00.0-v1", "0000:01:00.0"),
        ("garbage", None),
        (None, None),
    ],
)
def test_pci_bus_ids_normalise(text: str | bytes | None, expected: str | None) -> None:
    assert pci.normalize(text) == expected


def test_rocm_bdf_becomes_a_bus_id() -> None:
    assert pci.from_bdf((1 << 32) | (0xC1 << 8) | (2 << 3) | 1) == "0001:c1:02.1"
    assert pci.from_bdf(-1) is None


# -- NVML -------------------------------------------------------------------------------------------


def test_nvml_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    install_nvml(monkeypatch, None)
    with pytest.raises(RuntimeError, match="nvidia-ml-py is not installed"):
        nvml.list_gpus()


@pytest.mark.parametrize(
    "error, reason",
    [
        (NVMLError_LibraryNotFound(), "no NVIDIA driver (libnvidia-ml not found)"),
        (NVMLError_DriverNotLoaded(), "the NVIDIA driver is not loaded"),
        (NVMLError("Unknown Error"), "NVML error: Unknown Error"),
    ],
)
def test_nvml_without_a_driver(monkeypatch: pytest.MonkeyPatch, error: Exception, reason: str) -> None:
    install_nvml(monkeypatch, fake_pynvml([FakeNvidia()], init_error=error))
    with pytest.raises(RuntimeError) as info:
        nvml.list_gpus()
    assert str(info.value) == reason
    probe = probe_devices().probe("NVML")
    assert probe is not None and probe.detail == f"unavailable: {reason}"


def test_nvml_real_library_on_a_machine_without_nvidia_driver() -> None:
    """The real nvidia-ml-py: here there is no driver, and that is a clean 'unavailable'."""
    try:
        gpus = nvml.list_gpus()
    except RuntimeError as exc:
        assert "NVIDIA" in str(exc) or "NVML" in str(exc)
        assert nvml.process_memory() == {}
    else:  # pragma: no cover - a machine with an NVIDIA driver
        assert all(g.total > 0 for g in gpus if not g.error)


def test_nvml_reads_memory_processes_and_bus_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml(
        [
            FakeNvidia(
                used=6 * GiB, compute=[(ME, 2 * GiB), (111, 3 * GiB)], graphics=[(222, 512 * MiB), (111, 3 * GiB)]
            ),
            FakeNvidia(name="NVIDIA RTX A2000", total=12 * GiB, bus_id="00000000:02:00.0"),
        ]
    )
    install_nvml(monkeypatch, fake)
    first, second = nvml.list_gpus()
    assert fake.shutdowns == 1
    assert first.name == "NVIDIA GeForce RTX 4090" and first.pci_bus_id == "0000:01:00.0"
    assert first.free == 18 * GiB and first.used == 6 * GiB
    # a process in both lists counts once; this process is not "others"
    assert first.processes == {ME: 2 * GiB, 111: 3 * GiB, 222: 512 * MiB}
    assert first.held_by_others(ME) == (3 * GiB + 512 * MiB, True)
    assert second.pci_bus_id == "0000:02:00.0" and second.processes == {}
    assert nvml.process_memory(ME) == {0: 2 * GiB}


def test_nvml_without_process_sizes_falls_back_to_memory_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    # Windows' WDDM gives no per-process sizes; some containers refuse the lists altogether
    install_nvml(
        monkeypatch,
        fake_pynvml(
            [
                FakeNvidia(used=5 * GiB, compute=[(ME, 1 * GiB), (7, None)]),
                FakeNvidia(used=2 * GiB, process_lists_fail=True),
            ]
        ),
    )
    unknown_sizes, no_lists = nvml.list_gpus()
    assert unknown_sizes.held_by_others(ME) == (4 * GiB, False)  # in use, less what this process holds
    assert not no_lists.processes_known and no_lists.held_by_others(ME) == (2 * GiB, False)


def test_nvml_gpu_lost_mid_run_keeps_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    install_nvml(monkeypatch, fake_pynvml([FakeNvidia(lost=True), FakeNvidia(bus_id="00000000:02:00.0")]))
    lost, fine = nvml.list_gpus()
    assert "lost" in lost.error and lost.total == 0
    assert not fine.error and fine.total == 24 * GiB
    probe = probe_devices().probe("NVML")
    assert probe is not None and probe.available and "GPU0: the GPU is lost" in probe.detail


def test_nvml_failing_after_init_is_unavailable_and_shut_down(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml([FakeNvidia()], count_error=NVMLError("Uninitialized"))
    install_nvml(monkeypatch, fake)
    with pytest.raises(RuntimeError, match="Uninitialized"):
        nvml.list_gpus()
    assert fake.shutdowns == 1


# -- ROCm through pyrsmi ----------------------------------------------------------------------------


def test_pyrsmi_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    install_rocml(monkeypatch, None)
    with pytest.raises(RuntimeError, match="pyrsmi is not installed"):
        rocm.list_gpus()


def test_amd_driver_not_loaded_is_checked_before_pyrsmi(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_rocml([FakeAmd()], init_error=AssertionError("pyrsmi must not be asked"))
    install_rocml(monkeypatch, fake, driver_loaded=False)
    with pytest.raises(RuntimeError, match="amdgpu is not loaded"):
        rocm.list_gpus()


def test_rocm_library_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    install_rocml(monkeypatch, fake_rocml([], init_error=ROCMLError_LibraryNotFound("libamd_smi.so not found")))
    with pytest.raises(RuntimeError, match="ROCm is not installed"):
        rocm.list_gpus()


@pytest.mark.skipif(os.path.exists("/opt/rocm") or "ROCM_PATH" in os.environ, reason="ROCm is installed here")
def test_real_pyrsmi_without_rocm_library(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The real pyrsmi, told the driver is there: its missing library is a clean reason, in silence."""
    monkeypatch.setattr(rocm, "_AMDGPU_MODULE", str(tmp_path))
    with pytest.raises(RuntimeError, match="ROCm is not installed"):
        rocm.list_gpus()
    assert capfd.readouterr().err == ""


def test_rocm_reads_vram_gtt_and_bus_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_rocml([FakeAmd()])
    install_rocml(monkeypatch, fake)
    (gpu,) = rocm.list_gpus()
    assert (gpu.vram_total, gpu.vram_used, gpu.gtt_total, gpu.gtt_used) == (24 * GiB, 1 * GiB, 16 * GiB, 100 * MiB)
    assert gpu.vram_free == 23 * GiB and gpu.pci_bus_id == "0000:03:00.0"
    assert fake.shutdowns == 1


def test_rocm_unreadable_figures_count_as_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_rocml([FakeAmd(vram_used=-1)])
    install_rocml(monkeypatch, fake)
    assert rocm.list_gpus()[0].vram_used == 0


def test_rocm_error_mid_run(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_rocml([FakeAmd()], count_error=ValueError("device table changed"))
    install_rocml(monkeypatch, fake)
    with pytest.raises(RuntimeError, match="ROCm SMI error: device table changed"):
        rocm.list_gpus()
    assert fake.shutdowns == 1


# -- host ---------------------------------------------------------------------------------------------


def test_host_failure_is_recorded_and_the_rest_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> host.HostMemory:
        raise OSError("/proc is not mounted")

    monkeypatch.setattr(host, "read_host", broken)
    report = probe_devices()
    probe = report.probe("host")
    assert probe is not None and probe.detail == "unavailable: /proc is not mounted"
    assert report.probe("llama.cpp").available and report.host.total == 0


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="Linux's /proc/meminfo")
def test_host_memory_from_proc_is_what_psutil_reads() -> None:
    total, available, swap_total, _ = host._meminfo()
    assert total == psutil.virtual_memory().total and swap_total == psutil.swap_memory().total
    assert abs(available - psutil.virtual_memory().available) < 256 * 2**20  # read a moment apart


def test_host_memory_without_proc_comes_from_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "_meminfo", lambda: None)
    assert host.read_host().total == psutil.virtual_memory().total


def test_host_reads_ram_swap_and_features() -> None:
    mem = host.read_host()
    assert 0 < mem.available <= mem.total and mem.swap_free <= mem.swap_total
    assert host.process_rss() > 0 and host.rss_reader()() > 0
    used, total = host.ram_in_use()
    assert 0 < used < total == mem.total


# -- this machine, every probe at once ------------------------------------------------------------


def test_every_probe_reports_on_this_machine() -> None:
    report = probe_devices()
    names = [p.name for p in report.probes]
    assert names == ["llama.cpp", "NVML", "ROCm (pyrsmi)", "Metal", "host"]
    for p in report.probes:
        assert p.detail and (p.available or p.detail.startswith("unavailable: "))
    assert not report.simulated and report.host.total > 0
    assert report.held["CPU"].bytes == report.host.total - report.host.free
    json.dumps(report.to_json())  # plain data all the way down
