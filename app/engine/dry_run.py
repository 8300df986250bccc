"""llama.cpp's own dry run: the model and a context built with `no_alloc`, nothing allocated.

This is how llama.cpp's `--fit` measures a configuration: the real backend code
sizes every buffer, on the devices this machine has, without taking the memory.
The log then tells, per backend, the compute buffer (`sched_reserve: <buft>
compute buffer size = ...`), the output buffer, and each cache's size (`llama_kv_cache:
size = ... MiB (N cells, L layers, ...)`, `llama_memory_recurrent: size = ...`). Model
buffers print 0.00 MiB (dummy buffers): weights are not part of the answer.

Runs inside the engine process (`app.engine.child`): a crash here ends that process,
not the app. Figures are to within 0.01 MiB, the log's precision.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field

from app.engine.llama_log import capture
from planner.config import LoadConfig

_MiB = 1024 * 1024
_BUFFER = re.compile(r"^\s*(?P<func>\w+):\s+(?P<name>\S+)\s+(?P<what>KV|RS|output|compute) buffer size\s*=")
_SIZED = re.compile(
    r"^\s*(?P<func>\w+):\s+(?P<name>\S+)\s+(?P<what>output|compute) buffer size\s*=\s*"
    r"(?P<mib>[0-9.]+) MiB"
)
_CACHE_SIZE = re.compile(
    r"^\s*(?P<func>llama_kv_cache|llama_memory_recurrent):\s+size\s*=\s*(?P<mib>[0-9.]+) MiB"
    r"\s*\(\s*(?P<cells>\d+) cells,\s*(?P<layers>\d+) layers"
)
_SWA = re.compile(r"creating\s+(?P<non>non-)?SWA KV cache")


@dataclass
class DryRun:
    """What llama.cpp computed for one configuration, per buffer kind and buffer name.

    kv / kv_swa / recurrent: bytes per cache, keyed by the buffer names the cache spans (one
    name when the cache lives on one device, "CPU+CUDA0" when it spans two: the log gives one
    total per cache). output and compute: per buffer name (CPU, CUDA0, CUDA_Host ...)."""

    ok: bool
    seconds: float
    kv: dict[str, int] = field(default_factory=dict)
    kv_swa: dict[str, int] = field(default_factory=dict)
    recurrent: dict[str, int] = field(default_factory=dict)
    output: dict[str, int] = field(default_factory=dict)
    compute: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def by_kind(self) -> dict[str, dict[str, int]]:
        return {
            "kv": self.kv,
            "kv_swa": self.kv_swa,
            "recurrent": self.recurrent,
            "output": self.output,
            "compute": self.compute,
        }


def parse(lines: list[str]) -> DryRun:
    """The dry run's figures from llama.cpp's log lines (also usable on a real load's log)."""
    result = DryRun(ok=True, seconds=0.0)
    cache, names = "base", list[str]()
    for line in lines:
        swa = _SWA.search(line)
        if swa:
            cache, names = ("base" if swa["non"] else "swa"), []
            continue
        buffer = _BUFFER.match(line)
        if buffer and buffer["what"] in ("KV", "RS"):
            if buffer["what"] == "RS" and cache != "rs":
                cache, names = "rs", []
            names.append(buffer["name"])
            continue
        sized = _SIZED.match(line)
        if sized:
            target = result.output if sized["what"] == "output" else result.compute
            target[sized["name"]] = target.get(sized["name"], 0) + round(float(sized["mib"]) * _MiB)
            continue
        total = _CACHE_SIZE.match(line)
        if total:
            target = {"base": result.kv, "swa": result.kv_swa, "rs": result.recurrent}[
                "rs" if total["func"] == "llama_memory_recurrent" else cache
            ]
            key = "+".join(names) or "CPU"
            target[key] = target.get(key, 0) + round(float(total["mib"]) * _MiB)
            names = []
            if cache == "rs":
                cache = "base"
    return result


def dry_run(path: str, config: LoadConfig) -> DryRun:
    """Build the model and a context for `config` with no_alloc (about a second for the demo)."""
    import llama_cpp

    from app.engine.params import apply_context_params, apply_model_params, ensure_backend
    from app.engine.types import EngineError

    ensure_backend()
    log = capture()
    log.reset()
    start = time.perf_counter()
    mparams = llama_cpp.llama_model_default_params()
    apply_model_params(mparams, config)
    mparams.no_alloc = True
    mparams.load_mode = 0  # no mmap: nothing is read but the header
    model = llama_cpp.llama_model_load_from_file(os.fsencode(path), mparams)
    if not model:  # llama.cpp's own words say why (a tokenizer it does not know, a tensor it lacks ...)
        errors = log.errors()
        said = "; ".join(line.strip() for line in errors[-3:])
        raise EngineError("llama.cpp's dry run could not load the model" + (f": {said}" if said else ""), errors)
    try:
        cparams = llama_cpp.llama_context_default_params()
        apply_context_params(cparams, config)
        cparams.n_threads = cparams.n_threads_batch = 1
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        result = parse(list(log.size_lines))
        result.seconds = time.perf_counter() - start
        if not ctx:
            result.ok = False
            result.errors = log.errors()[-5:]
        else:
            llama_cpp.llama_free(ctx)
        return result
    finally:
        llama_cpp.llama_model_free(model)
