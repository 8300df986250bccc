"""The telemetry sampler: its readings, its failures, its thread, and its wiring to a loaded engine."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from app.devices import probe_devices
from app.devices.ggml import GGMLDevice
from app.engine import GenerationParams
from app.engine.process import EngineProcess
from app.telemetry import Sample, Telemetry, TelemetryConfig, for_engine, kv_bytes_in_use
from planner.anatomy import load_anatomy
from planner.config import LoadConfig, resolve
from planner.gguf import read_gguf
from planner.kv import kv_layout
from planner.memory import plan_memory
from tests.support.fake_gpus import GiB, cpu_device, install_llama_devices, install_nvml, install_rocml


def _wait_for(condition: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Poll until `condition` holds: a deadline against hangs, not a speed check."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class FakeEngine:
    def __init__(self, cells: int = 0) -> None:
        self.cells = cells

    def kv_cells_used(self) -> int:
        return self.cells


def _telemetry(**changes: object) -> Telemetry:
    fields: dict[str, object] = dict(
        memory=lambda: {"CUDA0": (3 * GiB, 8 * GiB)},
        rss=lambda: 123,
        host_memory=lambda: {"CPU": (5 * GiB, 32 * GiB)},
        engine=FakeEngine(7),
        kv_allocated=4096,
        compute={"CUDA0": 1000, "CPU": 10},
        speed=lambda: (42.5, True),
    )
    fields.update(changes)
    return Telemetry(**fields)  # type: ignore[arg-type]


# -- KV in use ------------------------------------------------------------------------------------------


def test_kv_in_use_grows_with_the_conversation_and_stops_at_the_window(zoo: dict[str, Path]) -> None:
    model = load_anatomy(read_gguf(zoo["gemma3"]))
    layout = kv_layout(model, resolve(model, LoadConfig(n_ctx=4096, flash_attn=True)))
    assert 0 < layout.cells_swa < layout.cells  # a sliding-window cache smaller than the full one
    full_cache = sum(t.nbytes for t in layout.tensors)
    assert kv_bytes_in_use(layout, 0) == 0 and kv_bytes_in_use(None, 100) == 0
    assert kv_bytes_in_use(layout, layout.cells) == full_cache  # a full context fills every cell
    assert kv_bytes_in_use(layout, 10 * layout.cells) == full_cache
    # below the window every cache grows per cell; past it only the full-attention layers do
    per_cell = kv_bytes_in_use(layout, 1)
    assert kv_bytes_in_use(layout, 100) == 100 * per_cell
    swa_full = sum(t.nbytes for t in layout.tensors if t.swa)
    growth = kv_bytes_in_use(layout, layout.cells_swa + 256) - kv_bytes_in_use(layout, layout.cells_swa)
    assert growth == 256 * (per_cell - swa_full // layout.cells_swa)


# -- one sample -------------------------------------------------------------------------------------------


def test_a_sample_holds_every_reading() -> None:
    s = _telemetry().sample_once()
    assert s.devices == {"CUDA0": (3 * GiB, 8 * GiB), "CPU": (5 * GiB, 32 * GiB)}
    assert s.free("CUDA0") == 5 * GiB and s.free("CPU") == 27 * GiB and s.free("ROCm0") is None
    assert (s.rss, s.kv_allocated, s.kv_cells_used, s.tokens_per_second, s.generating) == (123, 4096, 7, 42.5, True)
    assert s.compute == {"CUDA0": 1000, "CPU": 10} and s.errors == ()


def _boom() -> dict[str, tuple[int, int]]:
    raise RuntimeError("GPU fell off the bus")


class BrokenEngine:
    def kv_cells_used(self) -> int:
        raise ValueError("no context")


def test_each_failing_reading_is_counted_and_the_rest_kept() -> None:
    def no_rss() -> int:
        raise psutil.AccessDenied()

    def no_speed() -> tuple[float, bool]:
        raise AttributeError("last_stats")

    t = _telemetry(memory=_boom, rss=no_rss, engine=BrokenEngine(), speed=no_speed)
    s = t.sample_once()
    assert s.devices == {"CPU": (5 * GiB, 32 * GiB)}  # host RAM survives a GPU failure
    assert (s.rss, s.kv_cells_used, s.kv_used, s.tokens_per_second, s.generating) == (0, 0, 0, 0.0, False)
    assert t.errors == 4 and len(s.errors) == 4
    assert s.errors[0] == "device memory: RuntimeError: GPU fell off the bus"
    assert t.last_error.startswith("tokens/s: AttributeError")
    assert t.latest() is s


# -- the thread -------------------------------------------------------------------------------------------


def test_a_probe_raising_mid_run_does_not_kill_the_sampler() -> None:
    calls = {"n": 0}

    def flaky() -> dict[str, tuple[int, int]]:
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            raise OSError("driver reset")
        return {"CUDA0": (calls["n"], 8 * GiB)}

    t = _telemetry(memory=flaky, config=TelemetryConfig(interval=0.001, history=1000))
    t.start()
    try:
        _wait_for(lambda: t.errors >= 3 and len(t.history()) >= 8, "samples after failures")
        assert t.running
    finally:
        t.stop()
    history = t.history()
    assert any("CUDA0" in s.devices for s in history) and any("CUDA0" not in s.devices for s in history)
    assert all(s.devices["CPU"] == (5 * GiB, 32 * GiB) for s in history)


def test_start_and_stop_are_idempotent_and_clean() -> None:
    t = _telemetry(config=TelemetryConfig(interval=0.001))
    t.stop()  # never started: nothing to do
    t.start()
    thread = t._thread
    t.start()  # already running: the same thread
    assert t._thread is thread and t.running
    _wait_for(lambda: t.latest() is not None, "a first sample")
    t.stop()
    assert not t.running and thread is not None and not thread.is_alive()
    assert not any(th.name == "vramchat-telemetry" and th is thread for th in threading.enumerate())
    t.stop()
    count = len(t.history())
    t.start()  # and again after a stop
    _wait_for(lambda: len(t.history()) > count, "samples after a restart")
    t.stop()
    assert not t.running


def test_stop_does_not_wait_out_the_interval() -> None:
    """A sampler between samples of an hour's interval ends when stopped: the thread itself is held and
    seen to end within stop()'s wait, long before the hour is out."""
    t = _telemetry(config=TelemetryConfig(interval=3600))
    t.start()
    thread = t._thread
    assert thread is not None
    _wait_for(lambda: t.latest() is not None, "the first sample")
    t.stop(timeout=10)
    assert not thread.is_alive(), "the sampler still sleeps out its interval"
    assert not t.running


def test_a_sampler_that_has_not_ended_is_still_running() -> None:
    """stop() waits a bounded time; a sampler stuck in a reading past it is reported as still running
    (never as stopped), and ends once the reading returns."""
    entered, release = threading.Event(), threading.Event()

    def stuck() -> dict[str, tuple[int, int]]:
        entered.set()
        release.wait(30)
        return {"CUDA0": (1, 8 * GiB)}

    t = _telemetry(memory=stuck, config=TelemetryConfig(interval=0.001))
    t.start()
    thread = t._thread
    assert thread is not None and entered.wait(10)
    t.stop(timeout=0.05)
    assert t.running and thread.is_alive()
    release.set()
    thread.join(10)
    assert not thread.is_alive() and not t.running


def test_history_is_bounded() -> None:
    calls = {"n": 0}

    def counting() -> dict[str, tuple[int, int]]:
        calls["n"] += 1
        return {"CUDA0": (calls["n"], 8 * GiB)}

    t = _telemetry(memory=counting, config=TelemetryConfig(interval=0.0005, history=5))
    t.start()
    try:
        _wait_for(lambda: calls["n"] >= 12, "12 samples")
    finally:
        t.stop()
    history = t.history()
    assert len(history) == 5
    # the newest five, in order: the ring dropped the oldest
    assert [s.devices["CUDA0"][0] for s in history] == list(range(calls["n"] - 4, calls["n"] + 1))


# -- wired to a real engine ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine():
    e = EngineProcess()
    yield e
    e.close()


def _plan(path: Path, report, config: LoadConfig):
    return plan_memory(load_anatomy(read_gguf(path)), config, report.gpus, report.host)


@pytest.mark.llama
def test_simulated_devices_follow_the_plan(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    report = probe_devices(vram="8GiB/1GiB", ram="16GiB/2GiB")
    config = LoadConfig(n_gpu_layers=99, n_ctx=1024, flash_attn=True)
    plan = _plan(zoo["llama-f16"], report, config)
    engine.load(zoo["llama-f16"], config)
    t = for_engine(engine, report, plan)
    s = t.sample_once()
    assert s.devices["CUDA0"] == (1 * GiB + plan.gpus[0].planned, 8 * GiB)
    # mapped weights are file cache: available to others, not counted as in use (as psutil counts them)
    assert s.devices["CPU"] == (2 * GiB + plan.host.planned - plan.host.weights_mapped, 16 * GiB)
    assert t.unified == frozenset() and s.errors == ()
    # the arena and the KV cache as llama.cpp allocated them for this load
    m = engine.report.measurements
    assert s.compute == m.compute and s.kv_allocated == sum(m.kv.values()) + sum(m.kv_swa.values()) > 0
    assert s.rss > 0 and (s.kv_cells_used, s.kv_used, s.generating) == (0, 0, False)
    engine.unload()
    assert t.sample_once().devices["CUDA0"] == (1 * GiB, 8 * GiB)


@pytest.mark.llama
def test_kv_in_use_and_speed_while_generating(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    report = probe_devices(cpu_only=True)
    config = LoadConfig(n_ctx=512)
    plan = _plan(zoo["llama-f16"], report, config)
    engine.load(zoo["llama-f16"], config)
    t = for_engine(engine, report, plan)
    stream = engine.generate("hello", GenerationParams(max_tokens=16, temperature=0))
    next(stream)
    during = t.sample_once()
    assert during.generating and during.tokens_per_second > 0
    assert during.kv_cells_used == engine.kv_cells_used() > 0
    assert during.kv_used == kv_bytes_in_use(plan.kv, during.kv_cells_used) > 0
    for _ in stream:
        pass
    after = t.sample_once()
    assert not after.generating and after.kv_cells_used > during.kv_cells_used and after.kv_used > during.kv_used


@pytest.mark.llama
def test_this_machine_reads_host_ram_and_llama_cpp_gpus(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    report = probe_devices()
    engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512))
    s = for_engine(engine, report, None).sample_once()
    used, total = s.devices["CPU"]
    assert total == psutil.virtual_memory().total and 0 < used < total
    assert set(s.devices) == {"CPU", *(g.name for g in report.gpus)}
    assert s.rss > 0 and s.errors == ()
    assert s.kv_allocated > 0 and s.compute == engine.report.measurements.compute


def test_real_gpus_are_read_through_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    install_nvml(monkeypatch, None)
    install_rocml(monkeypatch, None)
    gpus = [GGMLDevice("CUDA0", "RTX 4090", "gpu", 20 * GiB, 24 * GiB, "0000:01:00.0"), cpu_device()]
    install_llama_devices(monkeypatch, gpus)
    report = probe_devices()
    t = for_engine(EngineProcess(), report, None)  # nothing loaded: memory is still watched
    s = t.sample_once()
    assert s.devices["CUDA0"] == (4 * GiB, 24 * GiB) and "CPU" in s.devices
    gpus[0] = GGMLDevice("CUDA0", "RTX 4090", "gpu", 12 * GiB, 24 * GiB, "0000:01:00.0")
    assert t.sample_once().devices["CUDA0"] == (12 * GiB, 24 * GiB)  # it moves with the device

    install_llama_devices(monkeypatch, RuntimeError("CUDA error: unspecified launch failure"))
    s = t.sample_once()
    assert "CUDA0" not in s.devices and "CPU" in s.devices
    assert t.errors == 1 and "unspecified launch failure" in s.errors[0]


def test_unified_gpus_are_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMCHAT_DEVICES", "backend=metal,24GiB,ram=32GiB")
    t = for_engine(EngineProcess(), probe_devices(), None)
    assert t.unified == frozenset({"MTL0"})
    s = t.sample_once()
    assert s.devices == {"MTL0": (0, 24 * GiB), "CPU": (0, 32 * GiB)} and isinstance(s, Sample)
