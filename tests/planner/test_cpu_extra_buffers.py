"""The CPU's extra buffer types: CPU_REPACK on AVX2/AVX-512 CPUs, AMX first on Intel Xeons with AMX.

On an AMX CPU this build crashed the demo's first decode and a deepseek2 context, so vramchat
loads there without extra buffer types unless asked; the planner follows whichever way the load
goes. The machine running the tests may have either CPU: the CPU features are passed in, and the
loads that llama.cpp can do on any CPU (with and without extra buffer types) are checked for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.gguf import read_gguf
from planner.hardware import GiB, Host
from planner.memory import plan_memory
from planner.weights import uses_cpu_extra_buffers
from tests.conftest import has_compiler
from tests.support.compare import compare_cpu, misses

EPYC = frozenset({"avx", "avx2", "avx512", "fma", "f16c", "avx512_vnni", "avx512_bf16"})
XEON_AMX = EPYC | {"amx_int8"}
MiB = 1024 * 1024
LOG_ROUNDING = (MiB + 199) // 200  # llama.cpp prints two decimals of a MiB


def _host_buffers(path: Path, features: frozenset[str], extra: bool | None = None) -> dict[str, int]:
    model = load_anatomy(read_gguf(path))
    plan = plan_memory(model, LoadConfig(n_ctx=2048, cpu_extra_buffers=extra), [], Host(64 * GiB, 64 * GiB, features))
    return {b.name: b.bytes for b in plan.buffers if b.kind == "weights"}


def test_amx_cpus_load_without_extra_buffers_unless_asked() -> None:
    assert uses_cpu_extra_buffers(None, EPYC)
    assert not uses_cpu_extra_buffers(None, XEON_AMX)
    assert uses_cpu_extra_buffers(True, XEON_AMX) and not uses_cpu_extra_buffers(False, EPYC)


def test_the_demo_on_an_amx_xeon_as_llama_cpp_allocated_it(gemma_path: Path) -> None:
    """Measured on an Intel Xeon with AMX with extra buffer types on: `AMX model buffer size = 213.91 MiB`
    and `CPU_Mapped model buffer size = 235.16 MiB`, no CPU_REPACK (the demo's other matrices are q5_0,
    which nothing repacks)."""
    buffers = _host_buffers(gemma_path, XEON_AMX, extra=True)
    assert set(buffers) == {"AMX", "CPU_Mapped"}
    assert abs(buffers["AMX"] - round(213.91 * MiB)) <= LOG_ROUNDING
    assert abs(buffers["CPU_Mapped"] - round(235.16 * MiB)) <= LOG_ROUNDING


def test_the_demo_on_an_amx_xeon_by_default_is_all_mapped(gemma_path: Path) -> None:
    buffers = _host_buffers(gemma_path, XEON_AMX)
    assert set(buffers) == {"CPU_Mapped"}
    on_epyc = _host_buffers(gemma_path, EPYC)
    assert set(on_epyc) == {"CPU_Mapped", "CPU_REPACK"}


@pytest.mark.parametrize("extra", [False, True])
@pytest.mark.parametrize("name", ["llama-q4_k", "qwen2-q4_0", "deepseek2", "gemma3"])
@pytest.mark.llama
@pytest.mark.skipif(not has_compiler(), reason="the oracle needs a C compiler")
def test_loads_with_and_without_extra_buffers_match_the_plan(zoo: dict[str, Path], name: str, extra: bool) -> None:
    """Both ways vramchat may load on some CPU, done here for real: every buffer as planned. (Planned for
    this machine's CPU: where it has AMX, extra=True is the AMX layout, elsewhere CPU_REPACK.)"""
    from app.devices.ggml import cpu_features

    if extra and name == "deepseek2" and "amx_int8" in cpu_features():
        pytest.skip(
            "this llama.cpp aborts creating a deepseek2 context with AMX buffers (GGML_ASSERT in the "
            "scheduler): the reason vramchat loads without extra buffer types on AMX CPUs"
        )
    rows = compare_cpu(zoo[name], [{"n_ctx": 2048, "flash_attn": True}], cpu_extra_buffers=extra)
    assert len(rows) == 1 and misses(rows) == []
    weights = rows[0].buffer("weights")
    assert weights is not None and weights.actual > 0


@pytest.mark.llama
@pytest.mark.skipif(not has_compiler(), reason="the oracle needs a C compiler")
def test_an_amx_cpus_default_load_matches_the_plan_here_too(gemma_path: Path) -> None:
    """What vramchat does on an AMX Xeon (no extra buffer types) is a load any CPU can do: the demo's
    plan for an AMX host equals what llama.cpp allocates when loaded that way on this machine."""
    rows = compare_cpu(gemma_path, [{"n_ctx": 4096, "flash_attn": True}], cpu_features=XEON_AMX)
    assert len(rows) == 1 and misses(rows) == []
