"""Which of a model's ops each GPU runs, asked of the device itself and kept per device and build.

Where llama.cpp runs a node depends on what each device's backend accepts (`ggml_backend_dev_supports_op`):
a node no GPU accepts runs on the CPU, its inputs and outputs copied across. Before a model is planned for
real devices, the ops of its graphs (planner.op_queries: the reserve graphs of a few configurations) are put
to each GPU by app.devices.op_probe, in a child process where a GPU backend is loaded, and the answers ride
on the planner's Device (planner.op_support.OpTable). They are kept in vramchat's cache, one folder per device
model, driver and llama.cpp build, with the ops each model asked: the next plan of the same model asks nothing,
and another model asks only the ops no model asked before.

What-if and simulated devices, and RPC servers (ggml-rpc accepts every op and lets the server's backend
decide), are not asked: the planner's rules per backend stand for them, as for any op the probe could not ask.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from planner import LLAMA_CPP_BUILD
from planner.hardware import Device
from planner.model import ModelAnatomy
from planner.op_support import Family, OpKey, OpTable, families, largest_tensor

FOLDER = "ops"
FILE = "support.json"
FORMAT = 1
MAX_MODELS = 256  # models remembered per device: the oldest is forgotten first, with the ops only it asked
PROBE_TIMEOUT = 120.0

# (device key, model digest) -> the table, for this process's later plans
_tables: dict[tuple[str, str], OpTable] = {}
# devices whose probe failed in this process (a libggml laid out otherwise, a crash): not asked again here
_unanswered: set[str] = set()


def askable(d: Device) -> bool:
    return d.is_gpu and not d.simulated and d.backend != "rpc"


def device_key(d: Device) -> str:
    """One store per device model, driver and build (the same card twice shares one)."""
    return "|".join((d.backend, d.card or d.description or d.name, d.driver, LLAMA_CPP_BUILD))


def _store_path(key: str) -> Path:
    from app.paths import cache_dir

    return cache_dir() / FOLDER / hashlib.sha1(key.encode()).hexdigest()[:16] / FILE


def _text(key: object) -> str:
    return json.dumps(key, separators=(",", ":"))


def _tuples(value: Any) -> Any:
    """JSON's lists back into the tuples the planner's keys are made of."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


class _Store:
    """One device's answers ({op key: bool}) and, per model, its op keys and its families' answers
    (planner.op_support.families), in one JSON file written whole."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.path = _store_path(key)
        self.answers: dict[str, bool] = {}
        self.models: dict[str, dict[str, Any]] = {}
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError, AttributeError):
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") == FORMAT and data.get("device") == key:
                self.answers = {str(k): bool(v) for k, v in data["answers"].items()}
                self.models = {str(k): dict(v) for k, v in data["models"].items()}

    def add(self, digest: str, keys: list[str], by_family: dict[Family, bool | None], answers: dict[str, bool]) -> None:
        self.answers.update(answers)
        self.models.pop(digest, None)
        self.models[digest] = {"keys": keys, "families": [[_text(f), a] for f, a in by_family.items()]}
        while len(self.models) > MAX_MODELS:
            self.models.pop(next(iter(self.models)))
        used = {k for model in self.models.values() for k in model["keys"]}
        self.answers = {k: v for k, v in self.answers.items() if k in used}

    def save(self) -> None:
        from app.caches.files import write_atomically

        text = json.dumps({"format": FORMAT, "device": self.key, "answers": self.answers, "models": self.models})
        write_atomically(self.path, text.encode(), keep=1)

    def table(self, digest: str) -> OpTable | None:
        model = self.models.get(digest)
        if model is None:
            return None
        try:
            answers = {_tuples(json.loads(k)): self.answers[k] for k in model["keys"] if k in self.answers}
            by_family = {_tuples(json.loads(f)): (None if a is None else bool(a)) for f, a in model["families"]}
        except (ValueError, TypeError, KeyError):
            return None
        return OpTable(answers, by_family)


def ask(queries: dict[str, list[OpKey]]) -> dict[str, list[bool | None]]:
    """Each device's answers, asked in a child process where a GPU backend is loaded (here otherwise);
    {} where the probe failed (the planner's rules then stand)."""
    from app.devices.ggml import probe_out_of_process

    if not any(queries.values()):
        return {name: [] for name in queries}
    if not probe_out_of_process():
        from app.devices.op_probe import ProbeMismatch, ask_devices
        from app.native import GGMLUnavailable

        try:
            return ask_devices({name: [list(k) for k in keys] for name, keys in queries.items()})
        except (GGMLUnavailable, ProbeMismatch):
            return {}
    import subprocess  # here: a plan without a GPU asks no device (subprocess and its modules: 2-3 ms to import)

    from app.children import child_env
    from app.native import IN_PROCESS_ENV

    request = json.dumps({"queries": {name: [list(k) for k in keys] for name, keys in queries.items()}})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "app.devices.op_probe"],
            input=request,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            env=child_env(None, **{IN_PROCESS_ENV: "1"}),
        )
        lines = proc.stdout.strip().splitlines()
        reply = json.loads(lines[-1]) if proc.returncode == 0 and lines else {}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}
    answers = reply.get("answers") if isinstance(reply, dict) else None
    return answers if isinstance(answers, dict) else {}


def with_op_support(model: ModelAnatomy, gpus: list[Device]) -> list[Device]:
    """The devices with what each answered for this model's ops (Device.op_support), asking only what is not
    known yet; devices that cannot be asked, or whose probe failed, come back as they were."""
    targets = [d for d in gpus if askable(d) and device_key(d) not in _unanswered]
    if not targets:
        return gpus
    from planner.compute_memo import model_digest

    digest = model_digest(model)
    tables: dict[str, OpTable] = {}
    stores: dict[str, _Store] = {}
    for d in targets:
        key = device_key(d)
        known = _tables.get((key, digest))
        if known is None:
            store = stores.setdefault(key, _Store(key))
            known = store.table(digest)
        if known is not None:
            tables[d.name] = _tables[(key, digest)] = known
    missing = [d for d in targets if d.name not in tables]
    if missing:
        _ask_for(model, digest, missing, stores, tables)
    return [replace(d, op_support=tables[d.name]) if d.name in tables else d for d in gpus]


def _ask_for(
    model: ModelAnatomy, digest: str, devices: list[Device], stores: dict[str, _Store], tables: dict[str, OpTable]
) -> None:
    from planner.op_queries import model_ops

    asked = model_ops(model)
    texts = {k: _text(k) for k in asked}
    queries: dict[str, list[OpKey]] = {}
    within: dict[str, list[OpKey]] = {}
    for d in devices:
        store = stores.setdefault(device_key(d), _Store(device_key(d)))
        # an op over the device's largest tensor is refused whatever it is (planner.gpu_ops): not asked
        limit = d.max_tensor_bytes
        within[d.name] = [k for k in asked if limit is None or largest_tensor(k) <= limit]
        queries[d.name] = [k for k in within[d.name] if texts[k] not in store.answers]
    replies = ask(queries)
    for d in devices:
        answers = replies.get(d.name)
        if answers is None or len(answers) != len(queries[d.name]):
            _unanswered.add(device_key(d))  # the planner's rules per backend stand for it
            continue
        key = device_key(d)
        store = stores[key]
        new = {texts[k]: bool(a) for k, a in zip(queries[d.name], answers) if a is not None}
        known = {k: store.answers.get(texts[k], new.get(texts[k])) for k in within[d.name]}
        by_family = families({k: asked[k] for k in within[d.name]}, {k: a for k, a in known.items() if a is not None})
        store.add(digest, [texts[k] for k in within[d.name]], by_family, new)
        store.save()
        table = store.table(digest)
        if table is not None:
            tables[d.name] = _tables[(key, digest)] = table
