"""The GPU backend's own memory per device: the CUDA context from the SM count, the runtime from ggml-cuda's
choices in the pinned build, learned figures, and the card table behind `--gpu`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from planner import cuda_paths
from planner import gpu_overhead as gpu_overhead_module
from planner.anatomy import load_anatomy
from planner.cards import CARDS, UnknownCard, apple_working_set, card_device, find_card, identify
from planner.fit import evaluate, fixed_config
from planner.ggml_types import ggml_type
from planner.gguf import read_gguf
from planner.gpu_overhead import (
    CUDA_ATTENTION_POOL_IN_FIT,
    CUDA_CONTEXT,
    CUDA_RUNTIME_CUBLAS,
    CUDA_RUNTIME_FLASH_ATTN,
    PUBLIC_CONTEXTS,
    Workload,
    context_for,
    gpu_overhead,
)
from planner.hardware import Device, GiB, Host, LearnedOverhead, MiB

FA = Workload(flash_attn=True, experts=False)
CUBLAS = Workload(flash_attn=False, experts=False)


@pytest.mark.parametrize(("card", "sms", "threads", "low", "high", "where"), PUBLIC_CONTEXTS)
def test_the_sm_rule_reproduces_every_public_context_within_6_percent(card, sms, threads, low, high, where) -> None:
    assert find_card(card).sm_count == sms and find_card(card).threads_per_sm == threads
    measured = (low + high) / 2 * MiB
    assert abs(context_for(sms, threads) - measured) <= 0.06 * measured, (card, where)


@pytest.mark.parametrize(
    ("card", "mib"), [("RTX 4060", 84), ("RTX 3060", 95), ("RTX 4070", 148), ("RTX 4090", 389), ("A100", 436)]
)
def test_predicted_contexts(card: str, mib: int) -> None:
    device = card_device(find_card(card), 0, "CUDA0")
    assert abs(gpu_overhead(device, FA).context - mib * MiB) <= 1 * MiB


def test_an_h100_keeps_the_figures_measured_on_ours() -> None:
    for device in (
        card_device(find_card("H100"), 0, "CUDA0"),
        # as the record's device reads: NVML's name only, no attributes
        Device("CUDA0", "gpu", "cuda", 80 * GiB, 80 * GiB, description="NVIDIA H100 80GB HBM3"),
    ):
        assert gpu_overhead(device, FA).total == CUDA_CONTEXT + CUDA_RUNTIME_FLASH_ATTN
        # the fitted runs' attention pool is planned apart, by the cells (none in this workload)
        assert gpu_overhead(device, CUBLAS).total == CUDA_CONTEXT + CUDA_RUNTIME_CUBLAS - CUDA_ATTENTION_POOL_IN_FIT
        assert "measured" in gpu_overhead(device, FA).source


def test_an_unknown_nvidia_gpu_falls_back_to_the_h100_figures_and_says_so() -> None:
    device = Device("CUDA0", "gpu", "cuda", 12 * GiB, 12 * GiB, description="simulated 12 GiB GPU")
    overhead = gpu_overhead(device, FA)
    assert overhead.context == CUDA_CONTEXT and "SM count is unknown" in overhead.source


def test_cublas_workspace_by_compute_capability_from_common_cuh() -> None:
    assert cuda_paths.cublas_workspace(cuda_paths.parse_cc("8.9")) == 4 * MiB
    assert cuda_paths.cublas_workspace(cuda_paths.parse_cc("9.0")) == 32 * MiB
    assert cuda_paths.cublas_workspace(cuda_paths.parse_cc("12.0")) == 32 * MiB
    assert cuda_paths.cublas_workspace(cuda_paths.parse_cc("gfx1100")) == 0  # HIP: hipBLAS keeps its own
    ada = card_device(find_card("RTX 4090"), 0, "CUDA0")
    assert gpu_overhead(ada, CUBLAS).parts["cublas_workspace"] == 4 * MiB
    assert "cublas_workspace" not in gpu_overhead(ada, FA).parts


Q4_K, Q6_K, Q4_0, F16 = (ggml_type(t) for t in ("q4_k", "q6_k", "q4_0", "f16"))


@pytest.mark.parametrize(
    ("cc", "type_", "batch", "experts", "mmq"),
    [
        ("7.5", Q6_K, 512, 0, True),  # Turing and newer: always MMQ
        ("8.9", Q4_K, 2048, 0, True),
        ("7.0", Q4_K, 63, 0, True),  # Volta: MMQ below 64 tokens
        ("7.0", Q4_K, 64, 0, False),
        ("6.1", Q4_K, 512, 0, True),  # GTX 10xx: no FP16 tensor cores, MMQ
        ("6.0", Q4_K, 512, 0, False),  # P100: no dp4a, cuBLAS for dense weights
        ("6.0", Q4_K, 512, 8, True),  # ... but MMQ for experts
        ("gfx90a", Q6_K, 512, 0, False),  # CDNA2
        ("gfx90a", Q4_0, 512, 0, True),
        ("gfx90a", Q4_K, 256, 0, True),
        ("gfx90a", Q4_K, 257, 0, False),
        ("gfx90a", Q6_K, 128, 0, True),
        ("gfx942", Q6_K, 512, 0, True),  # CDNA3: always MMQ
        ("gfx1100", Q6_K, 129, 0, False),  # RDNA3
        ("gfx1100", Q6_K, 128, 0, True),
        ("gfx1151", Q6_K, 256, 0, True),  # RDNA3.5
        ("gfx1201", Q6_K, 2048, 0, True),  # RDNA4
        ("8.9", F16, 512, 0, False),  # not a quantized type: no MMQ
    ],
)
def test_should_use_mmq_mirrors_mmq_cu(cc: str, type_, batch: int, experts: int, mmq: bool) -> None:
    parsed = cuda_paths.parse_cc(cc)
    assert parsed is not None
    assert cuda_paths.should_use_mmq(type_, parsed, batch, experts) is mmq


def test_weights_unpacked_to_f16_in_the_pool_where_mmq_is_skipped() -> None:
    ffn = cuda_paths.MatrixWeight(Q6_K, (14336, 4096, 1))  # a 8B model's ffn_down
    v100 = cuda_paths.parse_cc("7.0")
    assert v100 is not None
    peak = cuda_paths.dequant_pool_peak([ffn], 512, v100)
    # the matrix as F16, plus the activations as F16 (Volta writes F32 out, no dst_temp)
    assert peak == 14336 * 4096 * 2 + 14336 * 512 * 2
    assert cuda_paths.dequant_pool_peak([ffn], 63, v100) == 0  # below 64 tokens MMQ takes it
    assert cuda_paths.dequant_pool_peak([ffn], 512, cuda_paths.parse_cc("8.9") or 0) == 0


@pytest.fixture(scope="module")
def demo(gemma_path: Path):
    return load_anatomy(read_gguf(str(gemma_path)))


def _plan(model, device: Device, fa: bool = True, n_ctx: int = 4096):
    config = fixed_config(model, [device], n_gpu_layers=model.n_layer + 1, n_ctx=n_ctx, flash_attn=fa)
    return evaluate(model, config, [device], Host(64 * GiB, 64 * GiB)).plan


def test_a_v100_plans_the_demos_unpacked_weights_a_4090_does_not(demo) -> None:
    v100 = _plan(demo, card_device(find_card("V100"), 0, "CUDA0")).gpus[0].overhead_detail
    ada = _plan(demo, card_device(find_card("RTX 4090"), 0, "CUDA0")).gpus[0].overhead_detail
    assert v100 is not None and ada is not None
    assert v100.parts["dequantized_weights"] > 0 and "dequantized_weights" not in ada.parts


def test_without_flash_attention_the_pool_at_a_full_context_is_planned(demo) -> None:
    """Measured on a lent H200: a 6,144-token prompt took 174 MiB more of ggml-cuda's pool than a 512-token
    one (the rule: 176); the plan counts the pool at a full context."""
    device = card_device(find_card("RTX 4060"), 0, "CUDA0")
    plan = _plan(demo, device, fa=False, n_ctx=32768)
    detail = plan.gpus[0].overhead_detail
    assert detail is not None
    # half of the KQ matrix of one layer: 32,768 cells x 512 tokens x 4 heads, as F16
    assert detail.parts["attention_pool"] >= 32768 * 512 * 4 * 2
    assert detail.runtime >= detail.parts["attention_pool"] + gpu_overhead_module.CUDA_CUBLAS_REST
    assert "pool holds" in detail.source
    short = _plan(demo, device, fa=False, n_ctx=4096).gpus[0]
    assert plan.gpus[0].overhead - short.overhead >= (32768 - 4096) * 512 * 4 * 2
    with_fa = _plan(demo, device, fa=True, n_ctx=32768).gpus[0].overhead_detail
    assert with_fa is not None and "attention_pool" not in with_fa.parts


def test_a_learned_figure_replaces_the_derived_one_and_says_so() -> None:
    device = card_device(find_card("RTX 4060"), 0, "CUDA0")
    learned = replace(device, learned=LearnedOverhead(90 * MiB, runtime_flash_attn=70 * MiB, loads=3, replies=2))
    overhead = gpu_overhead(learned, FA)
    assert (overhead.context, overhead.runtime) == (90 * MiB, 70 * MiB)
    assert overhead.source.startswith("learned on this GPU, 3 loads")
    # no reply without flash attention seen yet: the derived cuBLAS runtime stands
    assert gpu_overhead(learned, CUBLAS).runtime == gpu_overhead(device, CUBLAS).runtime


def test_other_backends_are_named_estimates() -> None:
    for card, backend in (("RX 7900 XTX", "rocm"), ("M2 Max 64GB", "metal")):
        device = card_device(find_card(card), 0, "GPU0")
        overhead = gpu_overhead(device, FA)
        assert device.backend == backend and overhead.estimate and "estimate" in overhead.source


def test_card_names_are_tolerant_and_unknown_ones_list_near_matches() -> None:
    assert find_card("rtx4090") is find_card("NVIDIA GeForce RTX 4090") is find_card(" RTX  4090 ") is find_card("4090")
    assert find_card("Radeon RX 7900 XTX").backend == "rocm"
    with pytest.raises(UnknownCard, match="RTX 4090"):
        find_card("RTX 4091")
    with pytest.raises(UnknownCard, match="M2 Max 64GB"):
        find_card("M2 Max")  # three memory sizes: the name must say which
    assert identify("NVIDIA H100 80GB HBM3") is find_card("H100 SXM")
    assert identify("NVIDIA H100 PCIe") is find_card("H100 PCIe")
    assert identify("Some other GPU") is None


def test_every_card_has_what_the_planner_needs() -> None:
    names = [c.name for c in CARDS]
    assert len(names) == len(set(names))
    for card in CARDS:
        assert card.memory > 0 and card.bandwidth > 1e10 and card.sm_count
        if card.backend == "cuda":
            assert card.threads_per_sm in (1024, 1536, 2048) and cuda_paths.parse_cc(card.compute_capability)
        if card.backend == "rocm":
            assert (card.compute_capability or "").startswith("gfx")
        assert card_device(card, 0, "GPU0").bandwidth == card.bandwidth


def test_apple_working_set_by_memory() -> None:
    assert apple_working_set(16 * GiB) == 16 * GiB * 2 // 3
    assert apple_working_set(64 * GiB) == 48 * GiB
    assert abs(apple_working_set(128 * GiB) - 107.52 * GiB) < 0.05 * GiB  # measured on 128 GB Macs, macOS 26
    mac = card_device(find_card("M2 Max 64GB"), 0, "MTL0")
    assert mac.unified and mac.total == 48 * GiB
