"""llama.cpp's own dry run before every load: it confirms the plan, and corrects it when a rule is wrong.

Real llama.cpp in the engine process: the no_alloc dry run, then the real load, beside the
planner's figures.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.devices import probe_devices
from app.engine.dry_run import parse
from app.engine.llama_log import LOG_ROUNDING
from app.engine.planned_actual import compare_load
from app.engine.process import EngineProcess
from app.engine.verify import confirm_plan, verify
from app.planning import plan_again
from app.session import ModelSession
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.fit import Wishes, solve
from planner.gguf import read_gguf
from planner.hardware import GiB, Host, MiB
from planner.memory import plan_memory
from tests.support.tiny import TinySpec, write_tiny_model

pytestmark = pytest.mark.llama


@pytest.fixture(scope="module")
def engine():
    e = EngineProcess()
    yield e
    e.close()


def _host() -> Host:
    return probe_devices(cpu_only=True).host


def _allocated(report) -> dict[tuple[str, str], int]:
    m = report.measurements
    out = {}
    for kind, table in (
        ("kv", m.kv),
        ("kv_swa", m.kv_swa),
        ("recurrent", m.recurrent),
        ("output", m.output),
        ("compute", m.compute),
    ):
        for _name, size in table.items():
            out[(kind, "CPU")] = out.get((kind, "CPU"), 0) + size
    return out


@pytest.mark.parametrize(
    "name", ["llama-q4_k", "gemma3", "qwen3moe", "deepseek2", "mamba2", "granitehybrid", "rwkv7", "qwen3next"]
)
def test_planned_equals_dry_run_equals_allocated(engine: EngineProcess, zoo: dict[str, Path], name: str) -> None:
    path = str(zoo[name])
    plan = plan_memory(load_anatomy(read_gguf(path)), LoadConfig(n_ctx=2048, flash_attn=True), [], _host())
    check = verify(engine, path, plan)
    assert check.dry_run.ok and check.gaps
    assert check.verified, [g for g in check.gaps if not g.matches]
    kinds = {g.kind for g in check.gaps}
    assert {"compute", "output"} <= kinds
    report = engine.load(path, plan.config)
    allocated = _allocated(report)
    for g in check.gaps:  # the dry run said what the load then allocated
        assert abs(allocated[(g.kind, "CPU")] - g.measured) <= LOG_ROUNDING, g


def test_the_demo_is_confirmed_in_about_a_second(engine: EngineProcess, gemma_path: Path) -> None:
    plan = plan_memory(load_anatomy(read_gguf(gemma_path)), LoadConfig(n_ctx=4096, flash_attn=True), [], _host())
    check = verify(engine, str(gemma_path), plan)
    assert check.verified and {g.kind for g in check.gaps} == {"kv", "kv_swa", "output", "compute"}
    assert 0 < check.seconds < 10


def test_the_log_of_a_cache_spanning_two_devices_is_one_total() -> None:
    lines = [
        "llama_kv_cache:        CPU KV buffer size =     0.00 MiB",
        "llama_kv_cache:      CUDA0 KV buffer size =     0.00 MiB",
        "llama_kv_cache: size =  256.00 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16): 128.00 MiB, "
        "V (f16): 128.00 MiB",
        "llama_context:  CUDA_Host  output buffer size =     0.58 MiB",
        "sched_reserve:      CUDA0 compute buffer size =   300.01 MiB",
        "sched_reserve:  CUDA_Host compute buffer size =    16.01 MiB",
    ]
    dry = parse(lines)
    assert dry.kv == {"CPU+CUDA0": 256 * MiB}
    assert dry.compute == {"CUDA0": round(300.01 * MiB), "CUDA_Host": round(16.01 * MiB)}
    assert dry.output == {"CUDA_Host": round(0.58 * MiB)}


# 4 layers x 8 KV heads x 128 x (K + V) x f16 = 16 KiB per token: 1 GiB at 65,536 tokens
BIG_KV = TinySpec("llama", n_embd=1024, n_head=8, n_head_kv=8, n_ff=256, n_ctx_train=131072)


def test_a_wrong_rule_is_caught_and_the_solver_plans_what_fits(
    engine: EngineProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The KV rule is broken on purpose (half the bytes). With 900 MiB of RAM the broken plan keeps
    the full 65,536-token context; llama.cpp's dry run says the KV cache needs twice that, and the
    plan that comes back is one whose real figures fit."""
    path = str(write_tiny_model(tmp_path / "big-kv.gguf", BIG_KV))
    anatomy = load_anatomy(read_gguf(path))
    host = Host(total=64 * GiB, free=900 * MiB)
    wishes = Wishes(n_ctx=65536, kv_types=("f16",), flash_attn="on", margins={"CPU": 0})

    import planner.memory as memory

    honest = memory.kv_layout

    def halved(model, r):  # a KV rule that counts half the cells
        layout = honest(model, r)
        tensors = [dataclasses.replace(t, ne=(t.ne[0], t.ne[1] // 2, t.ne[2])) for t in layout.tensors]
        return dataclasses.replace(layout, tensors=tensors)

    monkeypatch.setattr(memory, "kv_layout", halved)
    broken = solve(anatomy, [], host, wishes)
    assert broken.plan.fits and broken.plan.resolved.n_ctx == 65536  # the broken rule thinks 65,536 fit

    confirmed = confirm_plan(
        engine, path, broken.plan, [], host, lambda g, h: _fitting(plan_again(anatomy, broken.plan, g, h))
    )
    assert not confirmed.verification.verified or confirmed.plan.config != broken.plan.config
    assert "more KV cache on CPU" in confirmed.message and "context 65,536 →" in confirmed.message
    fixed = confirmed.plan
    assert fixed.resolved.n_ctx < 65536 and fixed.fits
    monkeypatch.setattr(memory, "kv_layout", honest)
    # what the corrected plan says is what llama.cpp allocates: and it is within the 900 MiB
    report = engine.load(path, fixed.config)
    allocated_kv = sum(report.measurements.kv.values())
    assert abs(allocated_kv - sum(b.bytes for b in fixed.buffers if b.kind == "kv")) <= LOG_ROUNDING
    assert allocated_kv == 2 * fixed.kv_bytes  # the plan's layout is still the broken one; its buffers are not
    assert fixed.host.planned <= 900 * MiB


def test_a_dry_run_that_counts_less_than_an_exact_rule_does_not_shrink_the_plan(
    engine: EngineProcess, tmp_path: Path
) -> None:
    """MiniMax-01 with three sequences: llama.cpp's dry run reports about half the compute buffer that
    its load then allocates; the planner's exact rule said the allocation. The plan that loads keeps
    the larger figure, and the user is told why."""
    from tests.support.tiny import ZOO

    path = str(write_tiny_model(tmp_path / "minimax01.gguf", ZOO["minimax-01"]))
    anatomy = load_anatomy(read_gguf(path))
    assert anatomy.exact
    host = _host()
    fit = solve(anatomy, [], host, Wishes(n_ctx=4096, flash_attn="on", n_seq_max=3))
    planned = sum(b.bytes for b in fit.plan.buffers if b.kind == "compute")
    confirmed = confirm_plan(
        engine, path, fit.plan, [], host, lambda g, h: _fitting(plan_again(anatomy, fit.plan, g, h))
    )
    assert confirmed is not None
    dry = confirmed.verification.gap("compute", "CPU")
    assert dry is not None and dry.measured < planned - MiB  # what llama.cpp's dry run says
    kept = sum(b.bytes for b in confirmed.plan.buffers if b.kind == "compute")
    assert kept == planned and "larger figure kept" in confirmed.message
    report = engine.load(path, confirmed.plan.config)
    assert abs(sum(report.measurements.compute.values()) - kept) <= LOG_ROUNDING  # what the load allocates


def test_the_session_loads_the_plan_llama_cpp_confirmed(zoo: dict[str, Path]) -> None:
    path = str(zoo["gemma3"])
    devices = probe_devices(cpu_only=True)
    anatomy = load_anatomy(read_gguf(path))
    fit = solve(anatomy, [], devices.host, Wishes(n_ctx=2048))
    session = ModelSession()
    try:
        loaded = session.load(path, anatomy, fit, devices)
        assert loaded.verification is not None and loaded.verification.verified
        assert loaded.dry_run_message == ""
        assert all(row.matches for row in compare_load(loaded.plan, loaded.report) if row.kind != "process")
    finally:
        session.close()


@pytest.fixture
def without_baichuans_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Baichuan with its planner rules taken away: an architecture llama.cpp loads and the planner has
    no rules for (its graph is not llama's: the generic compute estimate is 258 KiB off). Every
    architecture llama.cpp loads with a plain decoder's tensors has rules now."""
    from planner import archs

    monkeypatch.delitem(archs.FAMILIES, "baichuan")


@pytest.mark.usefixtures("without_baichuans_rules")
def test_an_architecture_without_exact_rules_loads_with_llama_cpps_figures(tmp_path: Path) -> None:
    """An architecture without rules: its plan is an estimate until the dry run; the plan that loads
    carries llama.cpp's KV, output and compute."""
    path = str(write_tiny_model(tmp_path / "tiny-baichuan.gguf", TinySpec("baichuan")))
    devices = probe_devices(cpu_only=True)
    anatomy = load_anatomy(read_gguf(path))
    assert not anatomy.exact
    fit = solve(anatomy, [], devices.host, Wishes(n_ctx=2048))
    assert any("no exact rules" in e for e in fit.plan.estimates)
    session = ModelSession()
    try:
        loaded = session.load(path, anatomy, fit, devices)
        assert loaded.verification is not None and loaded.verification.dry_run.ok
        plan = loaded.plan
        assert not any("no exact rules" in e for e in plan.estimates)  # confirmed, no longer estimated
        m = loaded.report.measurements
        for kind, allocated in (("kv", m.kv), ("compute", m.compute), ("output", m.output)):
            planned = sum(b.bytes for b in plan.buffers if b.kind == kind)
            assert planned == sum(allocated.values()), kind  # the same figure, to the byte of the log
    finally:
        session.close()


@pytest.mark.usefixtures("without_baichuans_rules")
def test_an_estimate_says_so_in_the_list_until_the_dry_run(tmp_path: Path) -> None:
    from app.catalog import fit_badge, summarize

    path = str(write_tiny_model(tmp_path / "tiny-baichuan.gguf", TinySpec("baichuan")))
    host = probe_devices(cpu_only=True).host
    assert fit_badge(summarize(path, [], host))[0].endswith("· estimate")
    known = str(write_tiny_model(tmp_path / "tiny-llama.gguf", TinySpec("llama")))
    assert "estimate" not in fit_badge(summarize(known, [], host))[0]


def _fitting(fit):
    """The re-planned plan where it fits, as the session hands it to the dry run (None: nothing fits)."""
    return fit.plan if fit.plan.fits else None
