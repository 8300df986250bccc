"""Sliding-window models on a GPU backend, to the byte: every compute buffer of a Gemma 4, a Cohere 2 and a
Gemma 3 fully offloaded to the Vulkan device, flash attention on and off, two contexts and two micro-batches;
and a Gemma 4 with shared caches half offloaded.

Two rules make them exact. ggml-vulkan reorders each split's nodes before they are allocated
(planner.vk_graph_order) and pulls a RoPE's write into the KV cache forward only where the RoPE has no other
use: ggml counts uses in the graph as built, before the scheduler puts copies of the split's inputs (the
positions a RoPE reads) in their place; counting them after found none, and a 512-cell Cohere 2 came out
524,288 bytes under (3,428,352 planned, 3,952,640 allocated). And each layer reads the RoPE frequency factors
on its own device (llama.cpp duplicates rope_freqs per layer): read from host memory, a global layer on the
GPU cut the graph in one more split, and a half-offloaded Gemma 4 E2B's device compute came out 2 MiB under
(11,042,816 planned, 13,139,968 allocated)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.tiny import ZOO, write_tiny_model
from tests.support.vulkan import compare_vulkan

CONFIGS: list[dict[str, Any]] = [
    {"n_ctx": n_ctx, "flash_attn": flash_attn, "n_ubatch": n_ubatch}
    for n_ctx in (512, 4096)
    for flash_attn in (True, False)
    for n_ubatch in (512, 128)
]


@pytest.mark.parametrize("name", ["gemma4", "cohere2", "gemma3"])
def test_sliding_window_compute_on_the_device_is_planned_to_the_byte(name: str, tmp_path: Path) -> None:
    rows = compare_vulkan(write_tiny_model(tmp_path / f"{name}.gguf", ZOO[name]), CONFIGS, 99)
    assert len(rows) == len(CONFIGS)
    off = [
        f"{row.config} {b.device} {b.kind}: {b.planned:,} planned, {b.actual:,} allocated"
        for row in rows
        for b in row.buffers
        if b.error or row.refused_by_llama or row.refused_by_planner
    ]
    assert off == []


@pytest.mark.parametrize("config", [{"n_ctx": 4096, "flash_attn": True}, {"n_ctx": 512, "n_ubatch": 128}])
def test_a_global_layer_on_the_device_reads_its_own_rope_factors(config: dict[str, Any], tmp_path: Path) -> None:
    """Five of ten layers on the device, among them a global one with proportional RoPE (rope_freqs), the caches
    of the shared-cache layers in host memory."""
    spec = ZOO["gemma4-e2b-double-wide"]
    rows = compare_vulkan(write_tiny_model(tmp_path / "gemma4-e2b.gguf", spec), [config], spec.n_layer // 2)
    assert rows and [(b.device, b.kind, b.error) for row in rows for b in row.buffers if b.error] == []
