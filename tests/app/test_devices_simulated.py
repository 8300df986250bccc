"""Simulated devices: --vram and VRAMCHAT_DEVICES make the whole app believe in given devices."""

from __future__ import annotations

import pytest

from app.devices import held, probe_devices
from app.devices.simulated import parse_devices
from tests.support.fake_gpus import GiB, MiB, install_llama_devices


def test_parse_sizes_backends_and_ram() -> None:
    spec = parse_devices("24GiB/6GiB, 12000MiB, ram=64GiB/16GiB, backend=rocm")
    assert spec.gpus == [(24 * GiB, 6 * GiB), (12000 * MiB, 0)]
    assert spec.ram == (64 * GiB, 16 * GiB) and spec.backend == "rocm"
    assert [(d.name, d.backend, d.free, d.simulated) for d in spec.devices()] == [
        ("ROCm0", "rocm", 18 * GiB, True),
        ("ROCm1", "rocm", 12000 * MiB, True),
    ]


def test_a_bare_number_is_gib_and_units_still_count() -> None:
    """`--vram 8` is what a user means by it, an 8 GiB card (it was 8 bytes: "DOES NOT FIT ... 8 B free")."""
    spec = parse_devices("8, 1.5/0.5, 512MiB, 8B, ram=32/8")
    assert spec.gpus == [(8 * GiB, 0), (int(1.5 * GiB), GiB // 2), (512 * MiB, 0), (8, 0)]
    assert spec.ram == (32 * GiB, 8 * GiB)
    with pytest.raises(ValueError, match="positive"):
        parse_devices("0")
    report = probe_devices("8")
    assert report.gpus[0].free == 8 * GiB


def test_metal_is_named_as_llama_cpp_names_it_and_shares_host_ram() -> None:
    (gpu,) = parse_devices("backend=metal,16GiB").devices()
    assert gpu.name == "MTL0" and gpu.unified


def test_none_means_a_cpu_only_machine() -> None:
    assert parse_devices("none,ram=8GiB").devices() == []


@pytest.mark.parametrize(
    "text, message",
    [
        ("lots", "unknown size unit"),
        ("8GiB/9GiB", "more memory in use than the device has"),
        ("backend=tpu", "unknown backend"),
        ("vram=8GiB", "unknown setting"),
        ("0", "positive"),
    ],
)
def test_bad_values_say_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_devices(text)


def test_environment_variable_replaces_every_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    install_llama_devices(monkeypatch, AssertionError("real devices must not be asked"))
    monkeypatch.setenv("VRAMCHAT_DEVICES", "12GiB/2GiB,ram=32GiB/8GiB")
    report = probe_devices()
    assert report.simulated and report.mismatches == []
    (gpu,) = report.gpus
    assert (gpu.name, gpu.total, gpu.free, gpu.simulated) == ("CUDA0", 12 * GiB, 10 * GiB, True)
    assert (report.host.total, report.host.free, report.host.simulated) == (32 * GiB, 24 * GiB, True)
    assert report.held["CUDA0"] == held.HeldMemory(2 * GiB, held.SIMULATED)
    assert report.held["CPU"] == held.HeldMemory(8 * GiB, held.SIMULATED)
    assert report.probes[0].name == "simulated" and "VRAMCHAT_DEVICES" in report.probes[0].detail


def test_vram_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "12GiB")
    report = probe_devices(vram="8GiB,8GiB", ram="16GiB")
    assert [g.total for g in report.gpus] == [8 * GiB, 8 * GiB] and report.host.total == 16 * GiB
    assert "--vram" in report.probes[0].detail


def test_simulated_ram_alone_keeps_the_real_host_ram_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB")
    report = probe_devices()
    assert not report.host.simulated and report.held["CPU"].source == held.FROM_HOST


def test_cpu_flag_drops_the_simulated_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8GiB")
    assert probe_devices(cpu_only=True).gpus == []


def test_malformed_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "8 gigs")
    with pytest.raises(ValueError, match=r"^VRAMCHAT_DEVICES: "):
        probe_devices()


def test_blank_environment_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "  ")
    assert not probe_devices().simulated
