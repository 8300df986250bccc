"""Planned vs allocated on CUDA, from a recorded GPU measurement (bench/gpu/measure.py).

The record holds what llama.cpp allocated, buffer by buffer and device by device; this module
prices the same configurations with the planner of this checkout, for the GPU the record names,
so the comparison runs on any machine, GPU or not.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.errors import ConfigError
from planner.fit import FitResult, Wishes, solve
from planner.gguf import read_gguf
from planner.hardware import Device, GiB, Host
from planner.memory import DeviceUsage, MemoryPlan, plan_memory
from planner.model import ModelAnatomy
from tests.support.compare import DRY_RUN_TOLERANCE, BufferRow, ConfigRow, _load_config

DATA = Path(__file__).resolve().parents[1] / "data"
RECORD = DATA / "cuda_h100.json.gz"
GPU = "CUDA0"


@dataclass
class GpuRow(ConfigRow):
    """A ConfigRow of the GPU record: buffers keyed "kind device" (weights CUDA0, kv host ...)."""

    ngl: int = 0
    # llama.cpp's dry run, per kind summed over devices
    dry_run: dict[str, int] = field(default_factory=dict)

    def actual_total(self, kind: str) -> int:
        return sum(b.actual for b in self.buffers if b.kind.split()[0] == kind)

    def dry_run_off(self) -> list[str]:
        """Kinds where the dry run missed the allocation by more than the log's rounding (one line per buffer)."""
        off = []
        for kind, figure in self.dry_run.items():
            n_lines = max(1, sum(1 for b in self.buffers if b.kind.split()[0] == kind))
            if abs(figure - self.actual_total(kind)) > n_lines * DRY_RUN_TOLERANCE:
                off.append(kind)
        return off


def load_record(path: str | Path = RECORD) -> dict[str, Any]:
    """A record of bench/gpu/measure.py (gzipped in bench/data)."""
    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def record_cpu_features(record: dict[str, Any]) -> frozenset[str]:
    """The GPU machine's CPU features, from llama.cpp's system info ("AVX2 = 1 | AMX_INT8 = 1 | ...")."""
    info = record["machine"]["system_info"].split("CPU :", 1)[-1]
    return frozenset(m[1].lower() for m in re.finditer(r"(\w+) = (\d+)", info) if m[2] == "1")


def record_gpu(record: dict[str, Any]) -> Device:
    """The recorded GPU, as the planner sees it (all of its memory free: the oracle measures buffers)."""
    name, _driver, total, *_ = (x.strip() for x in record["machine"]["nvidia_smi"].split(","))
    size = int(total.split()[0]) * 1024 * 1024
    return Device(GPU, "gpu", "cuda", size, size, description=name)


def plan_for(model: ModelAnatomy, ngl: int, cfg: dict[str, Any], record: dict[str, Any]) -> MemoryPlan:
    host = Host(64 * GiB, 64 * GiB, record_cpu_features(record))
    config = _load_config(cfg).with_(n_gpu_layers=min(ngl, model.n_layer + 1))
    return plan_memory(model, config, [record_gpu(record)], host)


# what the hand search asked of the solver: the longest context up to 128K, an f16 cache, flash attention
HAND_SEARCH_WISHES = Wishes(n_ctx=131072, kv_types=("f16",), flash_attn="on")


def hand_search_best(record: dict[str, Any]) -> dict[str, Any]:
    """The hand search that ran to the end (its best context and its tries)."""
    return next(h for h in record["hand_search"] if "best" in h)


def solver_on_record(record: dict[str, Any], path: str) -> tuple[FitResult, ModelAnatomy]:
    """The solver of this checkout on the GPU as the app probed it under the other process's load."""
    device = record["solver_check"]["solver"]["devices"][0]
    gpu = Device(device["name"], "gpu", "cuda", device["total"], device["free"])
    model = load_anatomy(read_gguf(path))
    return solve(model, [gpu], Host(120 * GiB, 120 * GiB), HAND_SEARCH_WISHES), model


def planned_for_run(record: dict[str, Any], run: dict[str, Any], path: str) -> int:
    """The plan's CUDA0 total for one of the record's NVML runs (its spec, as nvml_run read it), with
    ggml-cuda's attention pool (no flash attention) as far as the run's prompt grew it: the plan counts
    it at a full context, and a reply's single tokens never use it."""
    spec = run["spec"]
    model = load_anatomy(read_gguf(path))

    def usage(n_ctx: int) -> DeviceUsage:
        config = LoadConfig(
            n_gpu_layers=min(spec["ngl"], model.n_layer + 1),
            n_ctx=n_ctx,
            n_batch=spec.get("n_batch", 512),
            n_ubatch=spec.get("n_ubatch", 512),
            flash_attn=spec["flash_attn"],
            swa_full=spec.get("swa_full", False),
        )
        return plan_memory(model, config, [record_gpu(record)], Host(64 * GiB, 64 * GiB)).gpus[0]

    def pool(u: DeviceUsage) -> int:
        return u.overhead_detail.parts.get("attention_pool", 0) if u.overhead_detail else 0

    full = usage(spec["n_ctx"])
    if not pool(full):
        return full.planned
    reached = min(spec["n_ctx"], -(-spec.get("prompt", 512) // 256) * 256)  # llama.cpp pads the cells to 256
    return full.planned - pool(full) + pool(usage(reached))


def _planned(plan: MemoryPlan) -> dict[str, int]:
    out: dict[str, int] = {}
    for b in plan.buffers:
        where = GPU if b.device == GPU else "host"
        out[f"{b.kind} {where}"] = out.get(f"{b.kind} {where}", 0) + b.bytes
    return out


def _actual(item: dict[str, Any], row: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}

    def add(key: str, size: int) -> None:
        out[key] = out.get(key, 0) + size

    for name, size in item["weights"].items():
        add(f"weights {GPU if name == GPU else 'host'}", size)
    for kv in row["kv"]:
        add(f"{'kv_swa' if kv['cache'] == 'swa' else 'kv'} {GPU if kv['name'] == GPU else 'host'}", kv["bytes"])
    for rs in row["rs"]:
        add(f"recurrent {GPU if rs['name'] == GPU else 'host'}", rs["bytes"])
    for name, size in row["output"].items():
        add(f"output {GPU if name == GPU else 'host'}", size)
    for name, size in row["compute"].items():
        add(f"compute {GPU if name == GPU else 'host'}", size)
    return out


def _dry(record: dict[str, Any]) -> dict[tuple[str, int, str], dict[str, int]]:
    """The dry run's figures per (model, ngl, config), per kind summed over devices (the log gives
    one figure per cache, also for a cache that spans the GPU and the host)."""
    out: dict[tuple[str, int, str], dict[str, int]] = {}
    for d in record.get("dry_runs", []):
        if not d.get("ok"):
            continue
        figures = {
            key: sum(d.get(kind, {}).values())
            for kind, key in (("kv", "kv"), ("kv_swa", "kv_swa"), ("recurrent", "recurrent"), ("compute", "compute"))
        }
        out[(d["model"], d["ngl"], json.dumps(d["config"], sort_keys=True))] = figures
    return out


def compare_record(record: dict[str, Any], model_path: dict[str, str]) -> list[GpuRow]:
    """One row per recorded configuration whose model file is in `model_path` (name -> .gguf)."""
    dry = _dry(record)
    rows: list[GpuRow] = []
    anatomies: dict[str, ModelAnatomy] = {}
    for item in record.get("buffers", []):
        name = item["model"]
        if "rows" not in item or name not in model_path:
            continue
        if name not in anatomies:
            anatomies[name] = load_anatomy(read_gguf(model_path[name]))
        model = anatomies[name]
        for result in item["rows"]:
            row = GpuRow(name, model.architecture, result["config"], ngl=item["ngl"])
            rows.append(row)
            try:
                plan = plan_for(model, item["ngl"], result["config"], record)
            except ConfigError as exc:
                row.refused_by_planner = str(exc)
            if not result["ok"]:
                row.refused_by_llama = (result["errors"] or ["refused"])[-1]
            if row.refused_by_llama or row.refused_by_planner:
                continue
            planned, actual = _planned(plan), _actual(item, result)
            row.dry_run = dry.get((name, item["ngl"], json.dumps(result["config"], sort_keys=True)), {})
            for key in sorted(set(planned) | set(actual), key=_order):
                row.buffers.append(BufferRow(key, planned.get(key, 0), actual.get(key, 0)))
    return rows


def _order(key: str) -> tuple[int, str]:
    kinds = ("weights", "kv", "kv_swa", "recurrent", "output", "compute")
    kind, where = key.split()
    return (kinds.index(kind) if kind in kinds else len(kinds), where)


def within(buf: BufferRow) -> bool:
    """The issue's bar: weights, caches and output exact; compute within 2% or 4 MiB."""
    return buf.within_tolerance


__all__ = [
    "DRY_RUN_TOLERANCE",
    "GpuRow",
    "compare_record",
    "load_record",
    "planned_for_run",
    "record_cpu_features",
    "within",
]
