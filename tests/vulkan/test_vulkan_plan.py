"""The planner on a real GPU backend: llama.cpp's Vulkan backend (lavapipe where no GPU is at hand), every
buffer llama.cpp allocates beside the plan's figure, with the device's own limits read through ggml."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.compare import ConfigRow, misses
from tests.support.tiny import ZOO, TinySpec, write_tiny_model
from tests.support.tiny.common import Q
from tests.support.vulkan import compare_vulkan, vulkan_devices

CONFIGS = [
    {"n_ctx": 512},
    {"n_ctx": 2048, "flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"},
    {"n_ctx": 4096, "flash_attn": False, "n_ubatch": 128},
]
# a Qwen2-7B-like vocabulary on a small body: its output matrix and its logits are over lavapipe's 128 MiB
BIG_VOCAB = TinySpec("qwen2", n_layer=4, n_embd=512, n_vocab=152064, embd_type=Q.Q8_0, output_type=Q.F16)


def _asked(rows: list[ConfigRow], configs: list[dict[str, object]]) -> bool:
    """One row per configuration asked, in order (the row's configuration also names the device and layers)."""
    return len(rows) == len(configs) and all(
        {k: row.config.get(k) for k in config} == config for row, config in zip(rows, configs, strict=True)
    )


def test_the_probe_reads_the_devices_limits_through_ggml() -> None:
    (device,) = vulkan_devices()[:1]
    assert device.name == "Vulkan0" and device.total > 0
    assert device.host_buffer == "Vulkan_Host"
    assert device.buffer_alignment and device.buffer_alignment & (device.buffer_alignment - 1) == 0
    assert device.max_tensor_bytes is None or device.max_tensor_bytes >= 64 << 20  # lavapipe: 128 MiB


@pytest.mark.parametrize("name", ["llama-q4_k", "qwen2-q4_0", "gemma3", "qwen2moe", "mamba2", "lfm2"])
@pytest.mark.parametrize("ngl", [0, 1, 3, 99])
def test_the_tiny_zoo_on_vulkan_is_planned_as_allocated(name: str, ngl: int, tmp_path: Path) -> None:
    rows = compare_vulkan(write_tiny_model(tmp_path / f"{name}.gguf", ZOO[name]), CONFIGS, ngl)
    assert _asked(rows, CONFIGS) and misses(rows) == []


def test_experts_kept_on_the_cpu(tmp_path: Path) -> None:
    path = write_tiny_model(tmp_path / "qwen2moe.gguf", ZOO["qwen2moe"])
    configs = [{**c, "n_cpu_moe": 2} for c in CONFIGS]
    rows = compare_vulkan(path, configs, 99)
    assert _asked(rows, configs) and misses(rows) == []


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("ngl", [2, 99])
def test_a_matrix_larger_than_the_device_takes_stays_on_the_cpu(tied: bool, ngl: int, tmp_path: Path) -> None:
    """A 152k vocabulary: the output matrix (or the tied embedding) and the logits are over lavapipe's 128 MiB
    maxStorageBufferRange; llama.cpp keeps the matrix in host memory and runs the logits on the CPU."""
    spec = BIG_VOCAB if not tied else TinySpec(**{**BIG_VOCAB.__dict__, "output_type": None})
    rows = compare_vulkan(write_tiny_model(tmp_path / "big-vocab.gguf", spec), CONFIGS[:2], ngl)
    assert _asked(rows, CONFIGS[:2]) and misses(rows) == []
    device = vulkan_devices()[0]
    if device.max_tensor_bytes is not None and device.max_tensor_bytes < 152064 * 512 * 2:
        for row in rows:
            weights = {b.device: b.actual for b in row.buffers if b.kind == "weights"}
            assert weights["Vulkan0"] < 20 << 20 and weights["CPU"] > 75 << 20  # the 79-155 MB matrix on the CPU


def test_the_demo_fully_offloaded_is_planned_to_the_byte(gemma_path: Path) -> None:
    """Gemma 3 270M, every layer on the device: the tied 262k embedding counted once (on the CPU), the
    logits' 514.5 MiB in the Vulkan_Host compute buffer, not on the device."""
    configs: list[dict[str, object]] = [{"n_ctx": 4096, "flash_attn": True}, {"n_ctx": 32768, "flash_attn": True}]
    rows = compare_vulkan(gemma_path, configs, 99)
    assert _asked(rows, configs) and misses(rows) == []
    for row in rows:  # every buffer of both places compared, the device's compute included
        assert {(b.device, b.kind) for b in row.buffers} >= {("Vulkan0", "weights"), ("Vulkan0", "compute")}
        assert {(b.device, b.kind) for b in row.buffers} >= {("CPU", "weights"), ("CPU", "compute")}


def test_the_device_order_of_a_moe_graph_is_replayed(tmp_path: Path) -> None:
    """ggml-vulkan reorders each split's nodes before they are allocated and keeps a fused MoE top-k's inputs
    alive (ggml_vk_graph_optimize): a qwen2moe at full offload with a q8_0 K cache without flash attention (its
    K x Q product on the CPU) reserved 33 MB more on the device than the graph's own order gives."""
    path = write_tiny_model(tmp_path / "qwen2moe.gguf", ZOO["qwen2moe"])
    configs = [{"n_ctx": 4096, "type_k": "q8_0", "flash_attn": False}, {"n_ctx": 4096, "flash_attn": False}]
    rows = compare_vulkan(path, configs, 99)
    assert _asked(rows, configs) and misses(rows) == []  # a refusal by both is a miss here, not agreement
