"""Loads split over RPC servers: every buffer on every device as the planner said, to the byte.

The first real multi-device check of the planner's layer split and scheduler replay that needs no
GPU: llama.cpp sees each server's CPU as a GPU-like device (RPC0, RPC1), puts layers, KV cache and
compute there, and with every layer on two servers turns on pipeline parallelism.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.rpc.endpoint import Endpoint
from tests.support.compare import misses
from tests.support.rpc import compare_rpc

CONFIGS = [{"n_ctx": 512}, {"n_ctx": 2048, "flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"}]


@pytest.mark.parametrize(
    "servers, n_gpu_layers, split",
    [(1, 99, [1]), (1, 2, [1]), (2, 99, [1, 1]), (2, 99, [3, 1]), (2, 3, [1, 1])],
    ids=["one-all", "one-some", "two-all-even", "two-all-3to1", "two-some"],
)
@pytest.mark.parametrize("name", ["llama-f16", "gemma3", "qwen2moe", "lfm2", "bloom", "step35", "hy_v3"])
def test_every_device_gets_what_was_planned(
    zoo: dict[str, Path], rpc_endpoints: list[Endpoint], name: str, servers: int, n_gpu_layers: int, split: list[float]
) -> None:
    rows = compare_rpc(zoo[name], CONFIGS, rpc_endpoints[:servers], n_gpu_layers, split)
    assert len(rows) == len(CONFIGS)
    assert misses(rows) == []
    for row in rows:
        devices = {b.device for b in row.buffers}
        assert devices == {"CPU", *(f"RPC{i}" for i in range(servers))} or n_gpu_layers < 99, devices


def _chat_zoo() -> list[str]:
    from planner.archs import NO_CACHE_ARCHS
    from tests.support.tiny import ZOO

    return [name for name, spec in ZOO.items() if spec.arch not in NO_CACHE_ARCHS]


@pytest.mark.parametrize("name", _chat_zoo())
def test_every_tiny_model_split_over_two_servers_lands_where_planned(
    zoo: dict[str, Path], rpc_endpoints: list[Endpoint], name: str
) -> None:
    """The last two layers on two servers, one each (the output on the second): every device's
    weights, caches and compute as planned. This sweep found tensors the planner put on the wrong
    device (token_embd_norm, hrm.z_l_init, gemma4's rope_freqs) and an MTP block's tensors that
    llama.cpp loads though it skips the block (step35, hy_v3)."""
    rows = compare_rpc(zoo[name], [{"n_ctx": 512}], rpc_endpoints, 2, [1, 1])
    assert len(rows) == 1 and misses(rows) == []
    (row,) = rows
    assert any(b.device == "RPC1" and b.kind == "weights" and b.actual for b in row.buffers), row.buffers  # the output
