"""The support table a device answered (planner.op_support) decides where the scheduler replay runs each node:
an op the device refuses runs on the CPU with its inputs and outputs copied across, and the plan says so, with
what it costs. Here the table is written by hand for a what-if Vulkan card; tests/vulkan/test_vulkan_ops.py asks
a real device and holds the result to llama.cpp's allocation."""

from __future__ import annotations

from pathlib import Path

from planner.anatomy import load_anatomy
from planner.compute import build_graph
from planner.config import LoadConfig, resolve
from planner.fit import evaluate
from planner.ggml_graph import F16, F32, Graph
from planner.gguf import read_gguf
from planner.hardware import Device, GiB, Host
from planner.kv import kv_layout
from planner.memory import plan_memory
from planner.model import ModelAnatomy
from planner.op_queries import model_ops
from planner.op_support import OpTable, families, graph_extents, op_key
from planner.report import plan_to_json, plan_to_table
from tests.support.tiny import ZOO, write_tiny_model

HOST = Host(64 * GiB, 64 * GiB)


def _model(tmp_path: Path, name: str) -> ModelAnatomy:
    return load_anatomy(read_gguf(write_tiny_model(tmp_path / f"{name}.gguf", ZOO[name])))


def _card(table: OpTable | None = None) -> Device:
    return Device("Vulkan0", "gpu", "vulkan", 8 * GiB, 8 * GiB, op_support=table)


def _refusing(model: ModelAnatomy, op: str) -> OpTable:
    """A device that runs every op of the model's graphs but `op`, as the probe would have recorded it."""
    asked = model_ops(model)
    answers = {key: key[0] != op for key in asked}
    return OpTable(answers, families(asked, answers))


def test_an_op_the_device_refuses_runs_on_the_cpu_and_the_plan_says_so(tmp_path: Path) -> None:
    model = _model(tmp_path, "deepseek32")
    config = LoadConfig(n_ctx=2048, n_gpu_layers=99)  # a context the probe did not ask at: the op's family answers
    runs_all = plan_memory(model, config, [_card(_refusing(model, "NO_SUCH_OP"))], HOST)
    refuses = plan_memory(model, config, [_card(_refusing(model, "LIGHTNING_INDEXER"))], HOST)
    assert runs_all.ops_on_cpu is None
    found = refuses.ops_on_cpu
    assert found is not None
    assert [(op, device) for op, device, _ in found.ops] == [("LIGHTNING_INDEXER", "Vulkan0")]
    assert found.ops[0][2] == model.n_trunk  # one indexer a layer
    assert found.splits > found.splits_on_device
    # the cost is the difference against the device running it: the same plan's figures
    assert refuses.host.compute - found.host_compute == runs_all.host.compute
    assert refuses.gpus[0].compute - dict(found.device_compute)["Vulkan0"] == runs_all.gpus[0].compute
    assert found.host_compute > 0

    result = evaluate(model, config, [_card(_refusing(model, "LIGHTNING_INDEXER"))], HOST)
    assert any("On the CPU: LIGHTNING_INDEXER" in str(reason) for reason in result.reasons)
    assert "ops on the CPU, refused by Vulkan0: LIGHTNING_INDEXER" in plan_to_table(result)
    data = plan_to_json(result)["ops_on_cpu"]
    assert data["ops"][0]["op"] == "LIGHTNING_INDEXER" and data["host_compute_bytes"] == found.host_compute


def test_without_an_answer_the_backends_rules_decide(tmp_path: Path) -> None:
    """A what-if card has no table: Vulkan's rules (a quantized K read through a strided view is not multiplied
    on the device) still put the K x Q product of a q8_0 cache without flash attention on the CPU."""
    model = _model(tmp_path, "llama-q4_k")
    plan = plan_memory(model, LoadConfig(n_ctx=2048, n_gpu_layers=99, type_k="q8_0"), [_card()], HOST)
    assert plan.ops_on_cpu is not None and {op for op, _, _ in plan.ops_on_cpu.ops} == {"MUL_MAT"}


def test_the_device_answer_wins_over_the_backends_rules(tmp_path: Path) -> None:
    model = _model(tmp_path, "llama-q4_k")
    config = LoadConfig(n_ctx=2048, n_gpu_layers=99, type_k="q8_0")
    plan = plan_memory(model, config, [_card(_refusing(model, "NO_SUCH_OP"))], HOST)
    assert plan.ops_on_cpu is None


def test_a_family_whose_members_differ_answers_nothing(tmp_path: Path) -> None:
    model = _model(tmp_path, "llama-q4_k")
    asked = model_ops(model)
    soft_max = [k for k in asked if k[0] == "SOFT_MAX"]
    assert len(soft_max) >= 2
    split = {k: k is not soft_max[0] for k in soft_max}  # one member refused: the family cannot say
    table = OpTable({}, families({k: asked[k] for k in soft_max}, split))
    unsure = OpTable({}, families({k: asked[k] for k in soft_max}, dict.fromkeys(soft_max, True)))
    # the attention's softmax over a 1,024-cell cache (asked at 512 and 4,096 cells only)
    r = resolve(model, LoadConfig(n_ctx=1024))
    kv = kv_layout(model, r)
    graph = build_graph(model, r, kv, 512, 1, 512).g
    node = next(n for n in graph.nodes if n.op == "SOFT_MAX" and n.ne[0] == 1024)
    extents = graph_extents(512, 512, kv.cells, kv.cells_swa)
    assert op_key(node) not in asked
    assert unsure.answer(node, extents) is True
    assert table.answer(node, extents) is None


def test_a_source_slot_left_empty_keeps_the_slots_after_it() -> None:
    """ggml's FLASH_ATTN_EXT with sinks and no mask has the sinks in src[4]: a backend reads the slot."""
    g = Graph()
    q, k, v = g.new_tensor(F32, (64, 8, 4)), g.new_tensor(F16, (64, 256, 2)), g.new_tensor(F16, (64, 256, 2))
    node = g.flash_attn_ext(q, k, v, None, g.new_tensor(F32, (4,)))
    _, _, _, sources = op_key(node)
    assert len(sources) == 5 and sources[3] is None and sources[4] is not None
    assert node.source(4) is node.src[3] and node.source(3) is None
