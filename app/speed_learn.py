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
configuration; else any model on these devices. Replies on simulated GPUs are not kept: the
engine then runs on the real machine, not on the card the plan is for.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cache_files import write_atomically
from app.speed_machine import speed_folder
from planner.speed import MAX_RATIOS, Calibration, TokenCost

if TYPE_CHECKING:
    from planner.memory import MemoryPlan

REPLIES_FILE = "replies.json"
FORMAT = 1
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
    from app.speed_machine import machine_key

    cpu = machine_key()
    gpus = [f"{d.name}:{d.backend}:{d.total}" for d in plan.gpus]
    return json.dumps([cpu["cpu"][:2], cpu["threads"], gpus])


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


def load_records() -> list[dict[str, Any]]:
    try:
        data = json.loads(_path().read_bytes())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("records"), list):
        return []
    return [r for r in data["records"] if isinstance(r, dict)]


def keep_record(record: dict[str, Any]) -> None:
    """Add one reply's record (atomically; a cache that cannot be written only learns nothing)."""
    with _lock:
        records = [*load_records(), record][-MAX_RECORDS:]
        write_atomically(_path(), json.dumps({"format": FORMAT, "records": records}).encode(), keep=16)


def calibration(model: str, devices: str, config: str, records: list[dict[str, Any]] | None = None) -> Calibration:
    """The ratios of the closest replies (see the module)."""
    records = load_records() if records is None else records
    mine = [r for r in records if r.get("devices") == devices]
    levels = (
        [r for r in mine if r.get("model") == model and r.get("config") == config],
        [r for r in mine if r.get("model") == model],
        mine,
    )
    for scope, chosen in zip(SCOPES, levels):
        decode = tuple(float(r["decode_ratio"]) for r in chosen if r.get("decode_ratio"))
        prefill = tuple(float(r["prefill_ratio"]) for r in chosen if r.get("prefill_ratio"))
        if decode or prefill:
            return Calibration(decode[-MAX_RATIOS:], prefill[-MAX_RATIOS:], scope)
    return Calibration()


def reply_record(
    path: str,
    plan: MemoryPlan,
    cost: TokenCost,
    decode_tps: float,
    decode_predicted: float | None,
    prefill_tps: float,
    prefill_predicted: float | None,
    fill: int,
    generated: int,
    evaluated: int,
) -> dict[str, Any] | None:
    """The record of one reply, or None when it says nothing (too short, or no prediction to compare)."""
    decode_ratio = decode_tps / decode_predicted if decode_predicted and generated >= MIN_DECODE_TOKENS else None
    prefill_ratio = prefill_tps / prefill_predicted if prefill_predicted and evaluated >= MIN_PREFILL_TOKENS else None
    if not decode_ratio and not prefill_ratio:
        return None
    return {
        "model": model_key(path),
        "devices": devices_key(plan),
        "config": config_key(plan),
        "fill": fill,
        "generated": generated,
        "evaluated": evaluated,
        "decode": round(decode_tps, 3),
        "decode_predicted": None if decode_predicted is None else round(decode_predicted, 3),
        "decode_ratio": None if decode_ratio is None else round(decode_ratio, 5),
        "prefill": round(prefill_tps, 3),
        "prefill_predicted": None if prefill_predicted is None else round(prefill_predicted, 3),
        "prefill_ratio": None if prefill_ratio is None else round(prefill_ratio, 5),
        "at": time.time(),
    }


def forget_all() -> None:
    """Remove every record (tests; a user can delete the file as well)."""
    with contextlib.suppress(OSError):
        _path().unlink()
