"""The engine's measurements: buffer sizes from llama.cpp's log, the process around a load, planned vs
actual. Real GGUF files in real llama.cpp, in the engine process as the app runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devices import ggml
from app.devices.buffer_names import device_of
from app.engine import EngineError, GenerationParams
from app.engine.llama_log import LOG_ROUNDING, LogCapture, Measurements
from app.engine.planned_actual import compare, compare_load
from app.engine.process import EngineProcess
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.gguf import read_gguf
from planner.hardware import GiB, Host
from planner.memory import MemoryPlan, plan_memory
from tests.support.fake_gpus import simulated_gpus

pytestmark = pytest.mark.llama


def _cpu_plan(path: Path, config: LoadConfig) -> MemoryPlan:
    model = load_anatomy(read_gguf(path))
    return plan_memory(model, config, [], Host(64 * GiB, 64 * GiB, ggml.cpu_features()))


@pytest.fixture(scope="module")
def engine():
    e = EngineProcess()
    yield e
    e.close()


@pytest.mark.parametrize(
    "name, config",
    [
        ("llama-q4_k", LoadConfig(n_ctx=1024)),
        ("gemma3", LoadConfig(n_ctx=2048, flash_attn=True)),  # a sliding-window cache of its own
    ],
)
def test_load_measures_every_buffer_as_planned(
    engine: EngineProcess, zoo: dict[str, Path], name: str, config: LoadConfig
) -> None:
    report = engine.load(zoo[name], config)
    m = report.measurements
    assert m.model and m.kv and m.output and m.compute
    assert bool(m.kv_swa) == (name == "gemma3")
    rows = compare_load(_cpu_plan(zoo[name], config), report)
    buffers = [r for r in rows if r.kind != "process"]
    assert {r.device for r in rows} == {"CPU"}
    expected = {"weights", "kv", "output", "compute"} | ({"kv_swa"} if name == "gemma3" else set())
    assert {r.kind for r in buffers} == expected
    for row in buffers:
        # llama.cpp logs two decimals of a MiB: planned and measured agree to that rounding
        assert row.matches, row
        assert 0 < row.tolerance <= 2 * LOG_ROUNDING


def test_load_records_the_process_before_and_after(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    config = LoadConfig(n_ctx=1024)
    report = engine.load(zoo["llama-f16"], config)
    before, after = report.process_before, report.process
    assert before is not None and after is not None and after.t >= before.t
    assert before.rss > 0 and after.rss > 0
    assert after.sources["psutil"] == "ok" and after.sources["llama.cpp"] == "ok"
    (row,) = [r for r in compare_load(_cpu_plan(zoo["llama-f16"], config), report) if r.kind == "process"]
    assert row.device == "CPU" and row.measured == after.rss - before.rss and row.planned > 0


def test_bad_file_is_an_engine_error(engine: EngineProcess, tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(EngineError, match="could not load the model"):
        engine.load(junk, LoadConfig(n_ctx=512))
    assert not engine.loaded


def test_kv_cells_follow_the_conversation(engine: EngineProcess, zoo: dict[str, Path]) -> None:
    engine.load(zoo["llama-f16"], LoadConfig(n_ctx=512))
    assert engine.kv_cells_used() == 0
    prompt = engine.tokenize("hello there")
    pieces = list(engine.generate(prompt, GenerationParams(max_tokens=8, temperature=0)))
    stats = engine.last_stats
    assert pieces and stats.generated_tokens > 0
    # the prompt and every token sampled sit in the cache (each is decoded for the next turn's prefix)
    assert engine.kv_cells_used() == len(prompt) + stats.generated_tokens
    engine.unload()
    assert engine.kv_cells_used() == 0


# -- planned vs actual with GPU buffer names (no GPU needed: the log lines are given) -----------------

GPU_LOG = """\
load_tensors:        CUDA0 model buffer size =    {weights_gpu:.2f} MiB
load_tensors:   CPU_Mapped model buffer size =    {weights_cpu:.2f} MiB
llama_context:  CUDA_Host  output buffer size =     {output:.2f} MiB
llama_kv_cache:        CPU KV buffer size =    {kv_cpu:.2f} MiB
llama_kv_cache:      CUDA0 KV buffer size =    {kv:.2f} MiB
sched_reserve:      CUDA0 compute buffer size =   {compute_gpu:.2f} MiB
sched_reserve:  CUDA_Host compute buffer size =     {compute_host:.2f} MiB
"""


def _gpu_plan(zoo: dict[str, Path]) -> MemoryPlan:
    model = load_anatomy(read_gguf(zoo["llama-f16"]))
    return plan_memory(
        model, LoadConfig(n_gpu_layers=2, n_ctx=1024), simulated_gpus([8 * GiB]), Host(64 * GiB, 64 * GiB)
    )


def _mib(plan: MemoryPlan, kind: str, device: str) -> float:
    return sum(b.bytes for b in plan.buffers if b.kind == kind and b.device == device) / 1024 / 1024


def test_gpu_buffers_land_on_their_devices(zoo: dict[str, Path]) -> None:
    plan = _gpu_plan(zoo)
    log = LogCapture()
    text = GPU_LOG.format(
        weights_gpu=_mib(plan, "weights", "CUDA0"),
        weights_cpu=_mib(plan, "weights", "CPU"),
        output=_mib(plan, "output", "CPU"),
        kv=_mib(plan, "kv", "CUDA0"),
        kv_cpu=_mib(plan, "kv", "CPU"),
        compute_gpu=_mib(plan, "compute", "CUDA0"),
        compute_host=_mib(plan, "compute", "CPU"),
    )
    for line in text.splitlines():
        log.feed(line)
    rows = {(r.kind, r.device): r for r in compare(plan, log.measurements)}
    assert set(rows) == {
        ("weights", "CUDA0"),
        ("kv", "CUDA0"),
        ("compute", "CUDA0"),
        ("weights", "CPU"),
        ("kv", "CPU"),
        ("output", "CPU"),
        ("compute", "CPU"),
    }
    assert all(r.matches for r in rows.values()), rows
    assert [r.device for r in compare(plan, log.measurements)][:3] == ["CUDA0"] * 3  # GPUs first

    log.feed("sched_reserve:      CUDA0 compute buffer size =  9999.00 MiB")  # a second reservation adds up
    worse = {(r.kind, r.device): r for r in compare(plan, log.measurements)}
    assert not worse[("compute", "CUDA0")].matches and worse[("compute", "CUDA0")].delta > 9000 * 1024 * 1024


def test_nothing_measured_reads_as_unknown(zoo: dict[str, Path]) -> None:
    rows = compare(_gpu_plan(zoo), Measurements())
    assert rows and all(r.measured is None and r.delta is None and not r.matches for r in rows)


@pytest.mark.parametrize(
    "buffer, device",
    [
        ("CUDA0", "CUDA0"),
        ("CUDA_Host", "CPU"),
        ("CPU_Mapped", "CPU"),
        ("CPU_REPACK", "CPU"),
        ("MTL0_Mapped", "MTL0"),
        ("ROCm_Host", "CPU"),
        ("Vulkan0", "Vulkan0"),
        ("CPU", "CPU"),
    ],
)
def test_buffer_names_map_to_devices(buffer: str, device: str) -> None:
    assert device_of(buffer, ["CUDA0", "MTL0", "Vulkan0"]) == device


def test_swa_cache_lines_are_told_apart() -> None:
    log = LogCapture()
    for line in (
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 2048 cells",
        "llama_kv_cache:        CPU KV buffer size =     2.00 MiB",
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells",
        "llama_kv_cache:        CPU KV buffer size =     1.50 MiB",
    ):
        log.feed(line)
    assert log.measurements.kv == {"CPU": 2 * 1024 * 1024}
    assert log.measurements.kv_swa == {"CPU": 3 * 512 * 1024}
