"""Vision projectors against libmtmd itself: clip's weight buffer and the compute buffer its warmup reserves.

Each tiny projector (tests/support/tiny_projectors.py) is loaded by mtmd_init_from_file in a
child process, flash attention on and off; the planner must match both buffers to the byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.anatomy import load_anatomy
from planner.backends import CPU
from planner.config import LoadConfig
from planner.gguf import read_gguf
from planner.hardware import Host
from planner.memory import plan_memory
from planner.projector import read_projector
from planner.projectors import RULES
from planner.projectors.compute import (
    compute_buffers,
    has_vision_graph,
    is_exact,
    loaded_tensors,
    peak_compute,
    weight_bytes,
)
from tests.conftest import has_compiler
from tests.support.compare_projectors import compare_largest_images, compare_projector
from tests.support.tiny_projectors import LARGEST, OTHER_SHAPES, PROJECTORS, ProjectorSpec, write_tiny_projector


@pytest.fixture(scope="module")
def projectors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("projectors")
    return {name: write_tiny_projector(folder / f"mmproj-{name}.gguf", spec) for name, spec in PROJECTORS.items()}


# every tiny projector whose type the planner builds exactly (a type without a rule stays an estimate)
EXACT = sorted(name for name, spec in PROJECTORS.items() if spec.projector_type in RULES)


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "no-fa"])
@pytest.mark.llama
@pytest.mark.skipif(not has_compiler(), reason="the oracle needs a C compiler")
def test_tiny_projectors_match_libmtmd(projectors: dict[str, Path], name: str, flash_attn: bool) -> None:
    (row,) = compare_projector(projectors[name], [{"flash_attn": flash_attn}])
    assert row.flash_attn == flash_attn  # clip did what was asked (the CPU runs flash attention)
    assert row.weights.error == 0, row
    assert row.compute.error == 0, row


@pytest.mark.llama
@pytest.mark.skipif(not has_compiler(), reason="the oracle needs a C compiler")
@pytest.mark.parametrize("name", sorted(OTHER_SHAPES))
def test_other_shapes_match_libmtmd(tmp_path: Path, name: str) -> None:
    path = write_tiny_projector(tmp_path / "mmproj.gguf", OTHER_SHAPES[name])
    for row in compare_projector(path, [{"flash_attn": True}, {"flash_attn": False}]):
        assert (row.weights.error, row.compute.error) == (0, 0), row


@pytest.mark.llama
@pytest.mark.skipif(not has_compiler(), reason="the oracle needs a C compiler")
@pytest.mark.parametrize("name", sorted(LARGEST))
def test_the_largest_image_grows_the_buffer_to_the_planned_peak(
    tmp_path: Path, zoo: dict[str, Path], name: str
) -> None:
    spec, max_tokens = LARGEST[name]
    path = write_tiny_projector(tmp_path / "mmproj.gguf", spec)
    rows = compare_largest_images(path, zoo["llama-f16"], max_tokens)
    p = read_projector(path)
    for row in rows:
        assert row.compute.error == 0, row
        if name != "gemma3":  # dynamic resolution: the warmup reserved less than the largest image needs
            assert row.compute.actual > compute_buffers(p, row.flash_attn)["CPU"], row
    for fa in (True, False):
        peak = max(row.compute.actual for row in rows if row.flash_attn == fa)
        assert peak == peak_compute(p, fa, image_max_tokens=max_tokens)["CPU"]


def test_every_rule_has_a_tiny_projector() -> None:
    assert set(RULES) <= {spec.projector_type for spec in PROJECTORS.values()}


def test_attention_without_flash_attention_grows_with_the_square_of_the_patches(tmp_path: Path) -> None:
    """The replay is not a constant: without flash attention the KQ matrix of the warmup image dominates."""
    spec = ProjectorSpec("gemma3", image_size=448, patch_size=14, n_embd=128, n_ff=256)
    p = read_projector(write_tiny_projector(tmp_path / "mmproj.gguf", spec))
    n_patches = (448 // 14) ** 2
    no_fa = compute_buffers(p, flash_attn=False)["CPU"]
    assert no_fa >= n_patches * n_patches * 4 * 4  # KQ: [n_patches, n_patches, n_head] in F32
    assert compute_buffers(p, flash_attn=True)["CPU"] < no_fa / 4


def test_a_plan_with_an_exact_projector_names_no_estimate(tmp_path: Path, zoo: dict[str, Path]) -> None:
    model = load_anatomy(read_gguf(zoo["llama-f16"]))
    exact = read_projector(write_tiny_projector(tmp_path / "exact.gguf", PROJECTORS["gemma3"]))
    host = Host(total=16 * 1024**3, free=16 * 1024**3)
    config = LoadConfig(n_gpu_layers=0, n_ctx=2048, flash_attn=True)
    plan = plan_memory(model, config, [], host, projector=exact)
    buffers = {b.kind: b.bytes for b in plan.buffers if b.kind.startswith("projector")}
    assert buffers["projector_compute"] == peak_compute(exact, True)["CPU"] == compute_buffers(exact, True)["CPU"]
    assert buffers["projector_weights"] == sum(CPU.padded(t.n_bytes) for t in exact.tensors)
    assert not any("projector" in e for e in plan.estimates)


def test_gemma4v_clamp_bounds_stay_out_of_the_weight_buffer(tmp_path: Path) -> None:
    p = read_projector(write_tiny_projector(tmp_path / "mmproj.gguf", PROJECTORS["gemma4v"]))
    bounds = [t for t in p.tensors if t.name.endswith("_min") or t.name.endswith("_max")]
    assert bounds and not set(bounds) & set(loaded_tensors(p))
    assert weight_bytes(p) == sum(t.n_bytes for t in p.tensors) - sum(t.n_bytes for t in bounds)


def test_a_projector_without_a_rule_stays_an_estimate(tmp_path: Path, zoo: dict[str, Path]) -> None:
    from tests.support.tiny_projectors import write_mlp_projector

    model = load_anatomy(read_gguf(zoo["llama-f16"]))
    mlp = read_projector(write_mlp_projector(tmp_path / "mlp.gguf"))
    assert not is_exact(mlp)
    host = Host(total=16 * 1024**3, free=16 * 1024**3)
    plan = plan_memory(model, LoadConfig(n_gpu_layers=0, n_ctx=2048, flash_attn=True), [], host, projector=mlp)
    assert any("mlp projector" in e and "estimated" in e for e in plan.estimates)


def test_an_audio_encoder_beside_an_exact_vision_graph_is_named_as_an_estimate(
    tmp_path: Path, zoo: dict[str, Path]
) -> None:
    spec = PROJECTORS["gemma4v"].with_(extra_kv={"clip.has_audio_encoder": True})
    both = read_projector(write_tiny_projector(tmp_path / "mmproj.gguf", spec))
    assert has_vision_graph(both) and not is_exact(both)
    vision = peak_compute(both, True)["CPU"]
    model = load_anatomy(read_gguf(zoo["llama-f16"]))
    host = Host(total=16 * 1024**3, free=16 * 1024**3)
    plan = plan_memory(model, LoadConfig(n_ctx=2048, flash_attn=True), [], host, projector=both)
    compute = next(b.bytes for b in plan.buffers if b.kind == "projector_compute")
    assert compute == vision + 64 * 1024 * 1024
    assert any("audio encoder" in e for e in plan.estimates)
