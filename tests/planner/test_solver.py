"""The fit solver on simulated GPUs: explained choices, and alternatives that really fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.anatomy import load_anatomy
from planner.fit import DEFAULT_CONTEXT_CAP, Wishes, solve
from planner.gguf import read_gguf
from planner.hardware import GiB, Host, MiB
from planner.memory import plan_memory
from tests.support.fake_gpus import simulated_gpus
from tests.support.synthetic import llama_like

HOST = Host(32 * GiB, 28 * GiB, frozenset({"avx2"}))


@pytest.fixture(scope="module")
def gemma(gemma_path: Path):
    return load_anatomy(read_gguf(gemma_path))


@pytest.fixture(scope="module")
def llama8b():
    return llama_like()


def _check_result(result) -> None:
    assert result.plan.fits or result.verdict == "no_fit"
    assert result.reasons and all(isinstance(r, str) and r for r in result.reasons)
    for alt in result.alternatives:
        # each alternative is a configuration the memory model itself says fits
        again = plan_memory(
            alt.plan.model, alt.plan.config, [d for d in simulated_gpus([g.total for g in alt.plan.gpus])], HOST
        )
        assert again.fits, alt.note
        assert alt.note


@pytest.mark.parametrize("gib", [2, 4, 8])
def test_gemma_on_small_gpus(gemma, gib: int) -> None:
    result = solve(gemma, simulated_gpus([gib * GiB]), HOST)
    _check_result(result)
    # 270M parameters fit whole on any of these; the planner says where every byte goes
    assert result.verdict == "full_gpu"
    assert result.plan.resolved.n_ctx == 32768
    gpu = result.plan.gpus[0]
    assert gpu.weights > 170 * MiB and gpu.compute > 256 * MiB  # the 262k-token logits live on the GPU


@pytest.mark.parametrize("gib, verdict", [(2, "partial_gpu"), (4, "partial_gpu"), (8, "full_gpu")])
def test_8b_model_on_2_4_8_gib(llama8b, gib: int, verdict: str) -> None:
    result = solve(llama8b, simulated_gpus([gib * GiB]), HOST)
    _check_result(result)
    assert result.verdict == verdict
    layers = result.plan.layers_on_gpu
    assert 0 < layers <= 33
    text = " ".join(result.reasons)
    if verdict == "partial_gpu":
        assert f"{layers} of 33 layers on the GPU" in text
        assert "run on the CPU" in text
    # context defaults to the trained context capped at 32k
    assert result.plan.resolved.n_ctx <= DEFAULT_CONTEXT_CAP


def test_more_vram_never_gives_fewer_layers(llama8b) -> None:
    layers = [solve(llama8b, simulated_gpus([g * GiB]), HOST).plan.layers_on_gpu for g in (2, 4, 6, 8, 12)]
    assert layers == sorted(layers)


def test_quantized_kv_only_when_it_buys_something(llama8b) -> None:
    roomy = solve(llama8b, simulated_gpus([24 * GiB]), HOST, Wishes(n_ctx=32768))
    assert roomy.plan.resolved.type_k.name == "f16"  # nothing to gain: stays f16
    tight = solve(llama8b, simulated_gpus([8 * GiB]), HOST, Wishes(n_ctx=65536))
    assert tight.plan.fits
    if tight.plan.resolved.type_k.name != "f16":
        assert any("quantized" in r for r in tight.reasons)


def test_cpu_only_and_no_fit(llama8b) -> None:
    cpu = solve(llama8b, [], HOST)
    assert cpu.verdict == "cpu_only" and cpu.plan.fits
    tiny_host = Host(2 * GiB, 1 * GiB, frozenset())
    nothing = solve(llama8b, [], tiny_host)
    assert nothing.verdict == "no_fit"
    assert any("Nothing fits" in r for r in nothing.reasons)


def test_memory_held_by_others_reduces_what_fits(llama8b) -> None:
    from planner.hardware import Device

    free = solve(llama8b, [Device("CUDA0", "gpu", "cuda", 8 * GiB, 8 * GiB)], HOST)
    busy = solve(llama8b, [Device("CUDA0", "gpu", "cuda", 8 * GiB, 5 * GiB)], HOST)
    assert busy.plan.layers_on_gpu < free.plan.layers_on_gpu


def test_a_smaller_micro_batch_when_compute_decides_the_fit(gemma) -> None:
    """The demo in 600 MiB of RAM: at the default micro-batch of 512 its compute buffer (the logits of
    262,144 tokens, 514.5 MiB) leaves nothing for the rest; at 128 the whole 32,768 tokens fit."""
    small = Host(600 * MiB, 600 * MiB, frozenset({"avx2"}))
    result = solve(gemma, [], small)
    config = result.plan.resolved.config
    assert result.plan.fits and config.n_ubatch == 128 and config.n_batch == 128
    assert result.plan.resolved.n_ctx == DEFAULT_CONTEXT_CAP
    why = next(r for r in result.reasons if isinstance(r, str) and r.startswith("Micro-batch 128"))
    assert "--ubatch 128 --batch 128" in why and "514.5 MiB" in why and "without it nothing fits" in why
    _check_result(result)


def test_the_default_micro_batch_when_it_costs_nothing(gemma) -> None:
    result = solve(gemma, [], HOST)
    assert result.plan.fits and result.plan.resolved.config.n_ubatch == 512
    assert not any(isinstance(r, str) and r.startswith("Micro-batch") for r in result.reasons)


def test_a_micro_batch_that_was_asked_for_is_kept(gemma) -> None:
    small = Host(600 * MiB, 600 * MiB, frozenset({"avx2"}))
    result = solve(gemma, [], small, Wishes(n_ubatch=512, n_batch=512))
    assert not result.plan.fits and result.plan.resolved.config.n_ubatch == 512


def test_a_context_past_the_trained_length_is_planned_with_a_warning(gemma) -> None:
    result = solve(gemma, [], HOST, Wishes(n_ctx=131072))
    assert result.plan.resolved.n_ctx == 131072
    warning = next(r for r in result.reasons if isinstance(r, str) and "trained for" in r)
    assert "beyond the 32,768" in warning and "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768" in warning
    within = solve(gemma, [], HOST, Wishes(n_ctx=32768))
    assert not any(isinstance(r, str) and "trained for" in r for r in within.reasons)
