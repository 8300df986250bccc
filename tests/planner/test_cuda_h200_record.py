"""The planner against a second CUDA record: a lent H200 (bench/gpu/lent.sh, 2026-11-27).

It measured the 82 zoo models the H100 record lacks (and four of its models again), NVML through
loads and replies, speed, and vramchat's choice beside llama.cpp's own fit. No GPU is needed here:
the record holds what llama.cpp allocated and what NVML saw; the planner of this checkout prices the
same configurations.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.hardware import MiB
from tests.support.gpu_record import DATA, compare_record, load_record, planned_for_run, within
from tests.support.header_clone import write

RECORD = load_record(DATA / "cuda_h200.json.gz")


@pytest.fixture(scope="module")
def models(zoo: dict[str, Path], gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    big = write(DATA / "llama-8b-shape.header.json.gz", tmp_path_factory.mktemp("big") / "big.gguf", sparse=True)
    return {
        **{name: str(path) for name, path in zoo.items()},
        "gemma3-270m": str(gemma_path),
        "llama-8b-shape": str(big),
    }


def test_the_record_names_an_h200_and_the_pinned_build() -> None:
    machine = RECORD["machine"]
    assert machine["nvidia_smi"].startswith("NVIDIA H200") and machine["llama_cpp_python"] == "0.3.36"


def test_every_buffer_of_the_models_the_h100_never_saw_matches(models: dict[str, str]) -> None:
    rows = compare_record(RECORD, models)
    assert len(rows) > 3000 and len({r.model for r in rows}) >= 86
    off = []
    for row in rows:
        assert bool(row.refused_by_llama) == bool(row.refused_by_planner), (row.model, row.config)
        off += [(row.model, row.ngl, row.config, b.kind, b.error) for b in row.buffers if not within(b)]
    assert off == []


def test_plan_total_is_what_nvml_saw_on_the_h200(models: dict[str, str]) -> None:
    """The H100's overhead figures hold on the H200 (same SMs and driver), and without flash attention
    the pool grows with the prompt as the rule says: 6,144 cells took 174 MiB more than 512."""
    runs = [r for r in RECORD["nvml"] if r["rc"] == 0]
    assert len(runs) >= 15
    for run in runs:
        nvml = run["steps"][-1]["proc"]
        planned = planned_for_run(RECORD, run, models[run["model"]])
        assert -8 * MiB <= planned - nvml <= 32 * MiB, (run["model"], run["spec"], (planned - nvml) / MiB)
    long = next(r for r in runs if r["spec"].get("prompt") == 6144)
    assert not long["spec"]["flash_attn"]
