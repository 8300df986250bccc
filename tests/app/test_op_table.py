"""Asking a device which of a model's ops it runs (app.devices.op_probe, app.devices.op_table), on any machine:
the CPU device answers supports_op too, so the tensors the probe writes into ggml's own structs are checked
against real answers here; the Vulkan tier asks a GPU backend (tests/vulkan/test_vulkan_ops.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.devices import op_table
from app.devices.op_probe import ask_devices
from planner.anatomy import load_anatomy
from planner.ggml_graph import F16, F32, Graph
from planner.ggml_types import ggml_type
from planner.gguf import read_gguf
from planner.hardware import Device, GiB
from planner.model import ModelAnatomy
from planner.op_queries import model_ops
from planner.op_support import op_key
from tests.support.tiny import ZOO, write_tiny_model


def _model(tmp_path: Path, name: str) -> ModelAnatomy:
    return load_anatomy(read_gguf(write_tiny_model(tmp_path / f"{name}.gguf", ZOO[name])))


def test_the_cpu_answers_for_a_models_ops_as_ggml_builds_them(tmp_path: Path) -> None:
    """Every op of a tiny DeepSeek V3.2's graphs (its lightning indexer included) is one the CPU runs; and the
    answer follows the types the probe wrote: the CPU multiplies a q8_0 matrix by F32 rows, not by F16 ones."""
    keys = list(model_ops(_model(tmp_path, "deepseek32")))
    answers = ask_devices({"CPU": [list(k) for k in keys]})["CPU"]
    assert len(answers) == len(keys) and all(answers)
    assert "LIGHTNING_INDEXER" in {k[0] for k in keys}

    g = Graph()
    matrix = g.new_tensor(ggml_type("q8_0"), (256, 64))
    by_f32 = op_key(g.mul_mat(matrix, g.new_tensor(F32, (256, 8))))
    by_f16 = op_key(g.mul_mat(matrix, g.new_tensor(F16, (256, 8))))
    assert ask_devices({"CPU": [list(by_f32), list(by_f16)]})["CPU"] == [True, False]


def test_an_unknown_device_or_op_answers_nothing() -> None:
    g = Graph()
    key = list(op_key(g.add(g.new_tensor(F32, (8, 8)), g.new_tensor(F32, (8, 8)))))
    assert ask_devices({"NoSuchDevice0": [key]}) == {"NoSuchDevice0": [None]}
    assert ask_devices({"CPU": [["NO_SUCH_OP", *key[1:]]]}) == {"CPU": [None]}


def _card(name: str = "Vulkan0") -> Device:
    return Device(name, "gpu", "vulkan", 8 * GiB, 8 * GiB, description="a test card", driver="1.0")


def test_a_models_ops_are_asked_once_per_device_and_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first plan of a model asks the device (in a child where a GPU backend is loaded); the answers are kept
    in the cache, so a later plan of the model, in this process or the next, asks nothing; a device that cannot be
    asked (a what-if card) keeps the planner's rules."""
    model = _model(tmp_path, "deepseek32")
    asked: list[dict[str, Any]] = []

    def fake_ask(queries: dict[str, list[Any]]) -> dict[str, list[bool | None]]:
        asked.append(queries)
        return {name: [k[0] != "LIGHTNING_INDEXER" for k in keys] for name, keys in queries.items()}

    monkeypatch.setattr(op_table, "ask", fake_ask)
    monkeypatch.setattr(op_table, "_tables", {})
    what_if = replace(_card("CUDA0"), backend="cuda", simulated=True)
    card, other = op_table.with_op_support(model, [_card(), what_if])
    assert len(asked) == 1 and list(asked[0]) == ["Vulkan0"] and other.op_support is None
    assert card.op_support is not None
    refused = {k[0] for k, ok in card.op_support.answers.items() if not ok}
    assert refused == {"LIGHTNING_INDEXER"}

    again = op_table.with_op_support(model, [_card()])[0]
    monkeypatch.setattr(op_table, "_tables", {})  # a new process: read back from the cache
    later = op_table.with_op_support(model, [_card()])[0]
    assert len(asked) == 1
    assert again.op_support is card.op_support
    assert later.op_support is not None and later.op_support.digest == card.op_support.digest


def test_a_failed_probe_leaves_the_backends_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model(tmp_path, "llama-q4_k")
    calls: list[int] = []

    def failing(queries: dict[str, list[Any]]) -> dict[str, list[bool | None]]:
        calls.append(1)
        return {}

    monkeypatch.setattr(op_table, "ask", failing)
    monkeypatch.setattr(op_table, "_tables", {})
    monkeypatch.setattr(op_table, "_unanswered", set())
    card = _card("Vulkan7")
    assert op_table.with_op_support(model, [card])[0].op_support is None
    assert op_table.with_op_support(model, [card])[0].op_support is None
    assert len(calls) == 1  # not asked again in this process
