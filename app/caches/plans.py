"""The plan cache: what the picker shows for each model, kept between runs.

An entry is keyed by the file (real path, size, mtime) and the planner's build; it
records the device fingerprint it was planned for. A hit with the same fingerprint
is fresh. A hit planned for different free memory is returned as stale, so the
picker can show it at once and re-plan in the background.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from app import __version__
from app.paths import cache_dir
from planner import LLAMA_CPP_BUILD
from planner.hardware import Device, Host

CACHE_FILE = "plans.json"
CACHE_FORMAT = 5  # 2: summaries carry the per-token cost the speed column needs; 3: with its mat-mul count;
# 4: with its attention layouts (width and KV heads: a cache from memory costs by them); 5: repacked weights apart
MAX_ENTRIES = 2000
_GPU_BUCKET = 256 * 1024 * 1024  # free memory is compared in steps, or every start would miss
_HOST_BUCKET = 1024 * 1024 * 1024


@dataclass
class ModelSummary:
    """A model's facts and its fit on this machine (the picker's row)."""

    name: str = ""
    architecture: str = ""
    n_params: int = 0
    quantization: str = ""
    file_bytes: int = 0
    n_layer: int = 0
    n_ctx_train: int = 0
    verdict: str = ""  # full_gpu, partial_gpu, cpu_only, no_fit; "" with an error
    layers_on_gpu: int = 0
    offload_badge: str = ""  # where a remote CPU holds layers: the badge's words for them (planner.offload)
    n_ctx: int = 0
    type_k: str = ""
    flash_attn: bool = False
    exact: bool = True
    checked: bool = False  # an estimate (not exact) that llama.cpp's dry run confirmed on these devices
    error: str = ""
    # the plan's per-token cost and learning keys (app.speed.summary_fields): the speed without planning again
    speed_cost: dict[str, Any] = field(default_factory=dict)
    speed_devices: str = ""
    speed_config: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelSummary:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def device_fingerprint(gpus: list[Device], host: Host) -> str:
    # a remote CPU is told apart from a remote GPU (its badge differs); other devices' prints are as before
    parts = [
        (d.name, "rpc-cpu" if d.remote_cpu else d.backend, d.total, d.free // _GPU_BUCKET, d.unified) for d in gpus
    ]
    text = json.dumps([parts, host.total, host.free // _HOST_BUCKET, sorted(host.cpu_features)])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def file_key(path: str, size: int, mtime_ns: int) -> str:
    return f"{os.path.realpath(path)}|{size}|{mtime_ns}|{LLAMA_CPP_BUILD}|{__version__}"


class PlanCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_dir() / CACHE_FILE
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # one save at a time: a save returns once what it found is on disk
        self._entries: dict[str, dict[str, Any]] = {}
        self._dirty = False
        self.load_error = ""
        self._load()

    def _load(self) -> None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            self.load_error = f"plan cache {self.path} unreadable ({exc}); starting afresh"
            return
        if isinstance(raw, dict) and raw.get("format") == CACHE_FORMAT and isinstance(raw.get("entries"), dict):
            self._entries = {k: v for k, v in raw["entries"].items() if isinstance(v, dict)}

    def get(self, key: str, fingerprint: str) -> tuple[ModelSummary, bool] | None:
        """(summary, fresh) for a cached file, or None."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or not isinstance(entry.get("summary"), dict):
            return None
        try:
            summary = ModelSummary.from_json(entry["summary"])
        except TypeError:
            return None
        return summary, entry.get("fingerprint") == fingerprint

    def put(self, key: str, fingerprint: str, summary: ModelSummary) -> None:
        with self._lock:
            self._entries[key] = {"fingerprint": fingerprint, "summary": summary.to_json(), "at": time.time()}
            self._dirty = True

    def save(self) -> None:
        """Write atomically if anything changed; a cache that cannot be written is only slower. A save that
        another thread's save is writing waits for it: the app's last save at exit is on disk when it returns."""
        with self._writing:
            with self._lock:
                if not self._dirty:
                    return
                entries = self._entries
                if len(entries) > MAX_ENTRIES:
                    keep = sorted(entries.items(), key=lambda kv: kv[1].get("at", 0), reverse=True)[:MAX_ENTRIES]
                    entries = self._entries = dict(keep)
                data = json.dumps({"format": CACHE_FORMAT, "entries": entries})
                self._dirty = False
            self._write(data)

    def _write(self, data: str) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            from app.caches.files import new_temporary

            fd, tmp = new_temporary(self.path.parent, ".json.tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)
