"""The speed model on a CPU unlike the ones it was developed on, from a record: a lent GPU machine's
16-vCPU Intel Xeon (AMX), its probe's figures and the speeds bench/speed_predict.py measured there
(tests/data/xeon16_speed.json.gz, made by bench/gpu/speed.sh and bench/gpu/cpu_speed.sh).

No such CPU is needed here: the planner of this checkout prices the recorded models with the recorded
probe, so a change that breaks the figures on a many-core Xeon fails on any machine.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from planner.anatomy import load_anatomy
from planner.fit import evaluate, fixed_config
from planner.gguf import read_gguf
from planner.hardware import GiB, Host
from planner.speed import CpuSpeed, predicted_decode, token_cost
from planner.speed.machine import REPACKED

RECORD = Path(__file__).resolve().parents[1] / "data" / "xeon16_speed.json.gz"
HOST = Host(128 * GiB, 120 * GiB, frozenset({"avx", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx_int8"}))
MEASURED_BAND = 0.30  # what a `measured` figure's range promises (planner.speed.basis: the basis's band)


def _record() -> dict[str, Any]:
    with gzip.open(RECORD, "rt") as fh:
        return dict(json.load(fh))


def test_the_demo_decodes_within_its_range_on_a_16_thread_xeon(gemma_path: Path) -> None:
    """The demo's decode there, at three fills, against its prediction from that machine's probe. Priced
    with the sampler figure of this EPYC's table (3.8 ns an entry; that Xeon's core takes 8.6), the
    prediction was 46-55% fast, outside the range the app shows; with the probe's own, 18-26%."""
    record = _record()
    cpu = CpuSpeed.from_json(dict(record["probe"], source="the lent Xeon"))
    assert cpu.threads == 16 and cpu.sampler_entry_seconds > 8e-9
    model = load_anatomy(read_gguf(gemma_path))
    # a CPU with AMX: the engine loads without the extra buffer types (planner.weights.uses_cpu_extra_buffers)
    plan = evaluate(model, fixed_config(model, [], n_ctx=4096, flash_attn=True), [], HOST).plan
    cost = token_cost(plan)
    assert not any(name.endswith(REPACKED) for d in cost.devices for name in d.weights)
    errors = {}
    for fill, measured in record["measured"]["demo"].items():
        predicted = predicted_decode(cost, int(fill) + 16, cpu, {})  # a 32-token reply: its middle
        assert predicted is not None
        errors[int(fill)] = predicted / measured["decode"] - 1
    assert all(abs(e) < MEASURED_BAND for e in errors.values()), errors
    table = replace(cpu, sampler_entry_seconds=0.0)  # what the plan said before the probe timed the sampler
    before = predicted_decode(cost, 32 + 16, table, {})
    assert before is not None and before / record["measured"]["demo"]["32"]["decode"] - 1 > MEASURED_BAND
