"""Learning from real replies: each reply's measured speed against the speed predicted for it.

A reply that decoded at least `MIN_DECODE_TOKENS` tokens is kept with the ratio
measured / predicted (the prediction for the cells it actually read: the prompt plus half
the reply), and its prefill likewise when it read at least `MIN_PREFILL_TOKENS` new prompt
tokens. Records are keyed by the model file (real path, size, time), the device set (this
CPU and thread count, each GPU's name, backend and size) and the configuration (GPU layers,
KV types, flash attention, experts on the CPU, micro-batch, CPU extra buffers, sequences);
the context length is left out, since the prediction already follows the cells read.

A later prediction takes the ratios of the closest records (planner.speed.Calibration):
this model in this configuration; else this model on these devices in another
configuration; else any model on these devices. Each ratio is worked out again with the
machine's figures of the moment, from the per-token cost kept beside the records (one per
model, devices and configuration): a probe taken again, or a new llama.cpp, keeps what the
replies taught. Replies on simulated GPUs are not kept: the engine then runs on the real
machine, not on the card the plan is for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.caches.files import write_atomically
from app.speed.machine import speed_folder
from planner.speed import MAX_RATIOS, Calibration, CpuSpeed, GpuSpeed, TokenCost, predicted_decode, predicted_prefill

if TYPE_CHECKING:
    from planner.memory import MemoryPlan

REPLIES_FILE = "replies.json"
FORMAT = 2
MAX_RECORDS = 2000
MIN_DECODE_TOKENS = 16  # shorter replies time the first tokens' warm-up more than the model
MIN_PREFILL_TOKENS = 64  # a few prompt tokens time the graph's start, not its arithmetic
SCOPES = ("this model and configuration", "this model with other settings", "other models on this machine")
_lock = threading.Lock()


def model_key(path: str) -> str:
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return f"{real}|{st.st_size}|{st.st_mtime_ns}"


def devices_key(plan: MemoryPlan) -> str:
    from app.speed.machine import cpu_identity

    gpus = [f"{d.name}:{d.backend}:{d.total}" for d in plan.gpus]
    threads = max(1, os.cpu_count() or 1)  # machine_key's "threads", without its RAM and library reads
    return json.dumps([cpu_identity()[:2], threads, gpus])


def config_key(plan: MemoryPlan) -> str:
    r = plan.resolved
    c = r.config
    return json.dumps(
        [
            r.n_gpu_layers if plan.gpus else 0,
            r.type_k.name,
            r.type_v.name,
            c.flash_attn,
            c.n_cpu_moe,
            r.n_ubatch,
            c.cpu_extra_buffers,
            r.n_seq_max,
            list(c.tensor_split),
        ]
    )


def _path() -> Path:
    return speed_folder() / REPLIES_FILE


def _load() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        data = json.loads(_path().read_bytes())
    except (OSError, ValueError):
        return [], {}
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("records"), list):
        return [], {}
    costs = data.get("costs")
    return [r for r in data["records"] if isinstance(r, dict)], costs if isinstance(costs, dict) else {}


def load_records() -> list[dict[str, Any]]:
    return _load()[0]


def keep_record(record: dict[str, Any], cost: TokenCost) -> None:
    """Add one reply's record and its plan's per-token cost (atomically; a cache that cannot be written
    only learns nothing)."""
    with _lock:
        records, costs = _load()
        records = [*records, record][-MAX_RECORDS:]
        costs[record["cost"]] = cost.to_json()
        costs = {k: v for k, v in costs.items() if any(r.get("cost") == k for r in records)}
        data = {"format": FORMAT, "records": records, "costs": costs}
        write_atomically(_path(), json.dumps(data).encode(), keep=16)


def calibration(model: str, devices: str, config: str, cpu: CpuSpeed | None, gpus: dict[str, GpuSpeed]) -> Calibration:
    """The ratios of the closest replies (see the module), against today's prediction for each."""
    records, costs = _load()
    mine = [r for r in records if r.get("devices") == devices]
    levels = (
        [r for r in mine if r.get("model") == model and r.get("config") == config],
        [r for r in mine if r.get("model") == model],
        mine,
    )
    parsed: dict[str, TokenCost | None] = {}

    def cost_of(record: dict[str, Any]) -> TokenCost | None:
        key = str(record.get("cost"))
        if key not in parsed:
            try:
                parsed[key] = TokenCost.from_json(costs[key])
            except (KeyError, TypeError, ValueError):
                parsed[key] = None
        return parsed[key]

    for scope, chosen in zip(SCOPES, levels):
        decode, prefill = [], []
        for r in chosen[-4 * MAX_RATIOS :]:
            cost = cost_of(r)
            if cost is None:
                continue
            if r.get("decode"):
                predicted = predicted_decode(cost, int(r["fill"]), cpu, gpus)
                if predicted:
                    decode.append(float(r["decode"]) / predicted)
            if r.get("prefill"):
                predicted = predicted_prefill(cost, int(r["evaluated"]), int(r.get("start", 0)), cpu)
                if predicted:
                    prefill.append(float(r["prefill"]) / predicted)
        if decode or prefill:
            return Calibration(tuple(decode[-MAX_RATIOS:]), tuple(prefill[-MAX_RATIOS:]), scope)
    return Calibration()


def reply_record(
    path: str,
    plan: MemoryPlan,
    decode_tps: float,
    prefill_tps: float,
    fill: int,
    generated: int,
    evaluated: int,
    start: int,
) -> dict[str, Any] | None:
    """The record of one reply, or None when it says nothing (too short to time either part)."""
    decode = generated >= MIN_DECODE_TOKENS and decode_tps > 0
    prefill = evaluated >= MIN_PREFILL_TOKENS and prefill_tps > 0
    if not decode and not prefill:
        return None
    model, devices, config = model_key(path), devices_key(plan), config_key(plan)
    return {
        "model": model,
        "devices": devices,
        "config": config,
        "cost": hashlib.sha1(f"{model}\n{devices}\n{config}".encode()).hexdigest()[:16],
        "fill": fill,
        "generated": generated,
        "evaluated": evaluated,
        "start": start,
        "decode": round(decode_tps, 3) if decode else None,
        "prefill": round(prefill_tps, 3) if prefill else None,
        "at": time.time(),
    }


def forget_all() -> None:
    """Remove every record (tests; a user can delete the file as well)."""
    with contextlib.suppress(OSError):
        _path().unlink()
