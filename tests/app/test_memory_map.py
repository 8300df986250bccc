"""A device's memory map: every part of it from the plan and the live reading, to scale."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.telemetry.memory_map import WORDS, cell_widths, device_map, device_maps, kv_in_use
from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.elastic import committed_plan
from planner.gguf import read_gguf
from planner.hardware import Device, GiB, Host, MiB
from planner.memory import plan_memory

GPU = Device("CUDA0", "gpu", "cuda", 8 * GiB, 7 * GiB)
HOST = Host(total=32 * GiB, free=24 * GiB)


@pytest.fixture(scope="module")
def plans(zoo: dict[str, Path]):
    anatomy = load_anatomy(read_gguf(zoo["llama-f16"]))
    plan = plan_memory(anatomy, LoadConfig(n_gpu_layers=99, n_ctx=32_768, flash_attn=True), [GPU], HOST)
    return plan, committed_plan(plan, 4_096, [GPU], HOST)


def test_the_parts_of_a_gpu_add_up_to_it_and_name_ours_others_and_the_room_kept(plans) -> None:
    plan, now = plans
    ours = now.gpus[0].planned
    used = 1 * GiB + ours  # the other programs' gigabyte at the probe, and ours
    m = device_map(plan, now, "CUDA0", (used, 8 * GiB), cells=1_000)
    parts = {s.key: s.bytes for s in m.segments}
    assert sum(parts.values()) == 8 * GiB and m.short == 0
    assert parts["others"] == 1 * GiB
    assert parts["kv_in_use"] == kv_in_use(now.kv, 1_000) > 0
    assert parts["kv_in_use"] + parts["kv_empty"] == now.gpus[0].kv
    assert parts["reserved"] == plan.gpus[0].planned - ours > 0  # the room the context grows into
    assert parts["margin"] == plan.gpus[0].margin
    assert parts["overhead"] == now.gpus[0].overhead and parts["compute"] == now.gpus[0].compute
    assert [s.key for s in m.segments][:2] == ["weights", "kv_in_use"]
    assert all(s.label and s.explanation for s in m.segments) and set(WORDS) >= set(parts)


def test_another_program_that_took_the_room_kept_free_is_said(plans) -> None:
    plan, now = plans
    free_left = 100 * MiB
    m = device_map(plan, now, "CUDA0", (8 * GiB - free_left, 8 * GiB), cells=0)
    assert m.get("free") == 0 and m.get("reserved") + m.get("margin") == free_left
    assert m.short == plan.gpus[0].planned - now.gpus[0].planned + plan.gpus[0].margin - free_left


def test_host_ram_shows_mapped_weights_apart_and_a_map_per_device_used(zoo: dict[str, Path]) -> None:
    anatomy = load_anatomy(read_gguf(zoo["llama-f16"]))
    plan = plan_memory(anatomy, LoadConfig(n_ctx=4_096), [], HOST)
    resident = plan.host.planned - plan.host.weights_mapped
    maps = device_maps(plan, plan, {"CPU": (8 * GiB + resident, 32 * GiB)}, cells=10)
    assert [m.name for m in maps] == ["CPU"]
    host = maps[0]
    assert host.get("mapped") == plan.host.weights_mapped > 0
    assert host.get("others") == 8 * GiB and host.get("reserved") == 0  # the context is at its maximum
    assert sum(s.bytes for s in host.segments) == 32 * GiB


def test_cells_are_to_scale_and_small_parts_still_get_one() -> None:
    assert cell_widths([50, 25, 25], 100, 8) == [4, 2, 2]
    assert sum(cell_widths([1, 999_000, 999], 1_000_000, 40)) == 40
    assert cell_widths([1, 999_000, 999], 1_000_000, 40)[0] == 1  # a tiny buffer is still seen
    assert cell_widths([10, 10], 0, 5) == [0, 0]


def test_kv_in_use_on_the_map_is_the_kv_plots_in_use_sliding_window_layers_included(zoo: dict[str, Path]) -> None:
    from app.telemetry import kv_bytes_in_use

    anatomy = load_anatomy(read_gguf(zoo["gemma2"]))
    plan = plan_memory(anatomy, LoadConfig(n_ctx=8_192), [], HOST)
    assert plan.kv.cells_swa and any(b.kind == "kv_swa" for b in plan.buffers)
    host = device_map(plan, plan, "CPU", None, cells=300)
    assert host.get("kv_in_use") == kv_bytes_in_use(plan.kv, 300) > kv_in_use(plan.kv, 300)
    swa_total = sum(b.bytes for b in plan.buffers if b.kind == "kv_swa")
    assert host.get("swa") == swa_total - kv_in_use(plan.kv, 300, swa=True)
