"""Ops a GPU backend cannot run, on a real one: the app's probe asks the Vulkan device which of a model's ops it
runs (ggml_backend_dev_supports_op, at the ops' shapes), the planner places each node where llama.cpp's scheduler
does, and every buffer of the load is held to what llama.cpp allocated. DeepSeek V3.2 and GLM DSA are the case
in point: ggml-vulkan's lightning indexer takes heads of 128 values only, so a model with smaller indexer heads
scores its cached tokens on the CPU in every layer, with copies each way (lavapipe where no GPU is at hand)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.devices.op_table import with_op_support
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.gguf import read_gguf
from planner.hardware import GiB, Host
from planner.memory import plan_memory
from tests.support.compare import ConfigRow
from tests.support.tiny import ZOO, TinySpec, write_tiny_model
from tests.support.tiny.deepseek2 import V3_ROUTING, mla_spec
from tests.support.tiny.deepseek32 import MTP_MODELS
from tests.support.vulkan import compare_vulkan, vulkan_devices

CONFIGS: list[dict[str, Any]] = [
    {"n_ctx": 512},
    {"n_ctx": 2048, "flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"},
    {"n_ctx": 4096, "flash_attn": False, "n_ubatch": 128},
]
# the tiny zoo's indexers have heads of 64 values; this one has DeepSeek V3.2's 128, which ggml-vulkan runs
WIDE_INDEXER = mla_spec(
    "deepseek32",
    {
        **V3_ROUTING,
        "attention.indexer.head_count": 4,
        "attention.indexer.key_length": 128,
        "attention.indexer.top_k": 2048,
    },
)
MTP = MTP_MODELS["deepseek32-mtp"]  # an MTP layer, the globals first in the file


def _off(rows: list[ConfigRow]) -> list[str]:
    out = []
    for row in rows:
        if bool(row.refused_by_llama) != bool(row.refused_by_planner):
            out.append(f"{row.config}: llama.cpp {row.refused_by_llama!r}, planner {row.refused_by_planner!r}")
        out += [
            f"{row.config} {b.device} {b.kind}: {b.planned:,} planned, {b.actual:,} allocated"
            for b in row.buffers
            if b.error
        ]
    return out


def _table_says(spec: TinySpec, tmp_path: Path) -> dict[str, set[bool]]:
    """What the device answered for each op name of the model's graphs."""
    model = load_anatomy(read_gguf(write_tiny_model(tmp_path / "asked.gguf", spec)))
    (device,) = with_op_support(model, vulkan_devices()[:1])
    assert device.op_support is not None, "the probe asked nothing"
    out: dict[str, set[bool]] = {}
    for key, answer in device.op_support.answers.items():
        out.setdefault(key[0], set()).add(answer)
    return out


def test_the_device_is_asked_at_the_ops_shapes(tmp_path: Path) -> None:
    """The same op, two answers: indexer heads of 64 values refused, of 128 run (on a device with fp16)."""
    narrow = _table_says(ZOO["deepseek32"], tmp_path)
    assert narrow["LIGHTNING_INDEXER"] == {False}
    assert narrow["MUL_MAT"] >= {True} and narrow["RMS_NORM"] == {True}
    assert _table_says(WIDE_INDEXER, tmp_path)["LIGHTNING_INDEXER"] == {True}


@pytest.mark.parametrize("name", ["deepseek32", "glm-dsa"])
@pytest.mark.parametrize("ngl", [1, 3, 99])
def test_an_op_the_device_lacks_runs_on_the_cpu_as_planned(name: str, ngl: int, tmp_path: Path) -> None:
    """Every buffer exact to the byte on both devices, the indexer on the CPU in each offloaded layer."""
    rows = compare_vulkan(write_tiny_model(tmp_path / f"{name}.gguf", ZOO[name]), CONFIGS, ngl)
    assert rows and _off(rows) == []


def test_the_plan_names_the_op_on_the_cpu_and_its_cost(tmp_path: Path) -> None:
    path = write_tiny_model(tmp_path / "deepseek32.gguf", ZOO["deepseek32"])
    model = load_anatomy(read_gguf(path))
    gpus = with_op_support(model, vulkan_devices()[:1])
    plan = plan_memory(model, LoadConfig(n_ctx=2048, n_gpu_layers=99), gpus, Host(64 * GiB, 64 * GiB))
    found = plan.ops_on_cpu
    assert found is not None
    assert [(op, device) for op, device, _ in found.ops] == [("LIGHTNING_INDEXER", gpus[0].name)]
    assert found.splits > found.splits_on_device and found.host_compute > 0


def test_an_indexer_the_device_runs_stays_on_it(tmp_path: Path) -> None:
    rows = compare_vulkan(write_tiny_model(tmp_path / "wide.gguf", WIDE_INDEXER), CONFIGS[:2], 99)
    assert rows and _off(rows) == []


@pytest.mark.parametrize("ngl", [0, 3, 99])
def test_the_mapped_weights_reach_the_mtp_layers_router_bias(ngl: int, tmp_path: Path) -> None:
    rows = compare_vulkan(write_tiny_model(tmp_path / "mtp.gguf", MTP), CONFIGS[:1], ngl)
    assert rows and _off(rows) == []
