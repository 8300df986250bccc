"""One load, prompt and generation in real llama.cpp, with NVML's reading of this process's GPU memory.

    python -m bench.gpu.nvml_run '{"model": "m.gguf", "ngl": 99, "n_ctx": 4096, "gen": 2000}'

Prints one JSON line per step (start, model, context, prompt, prefill, generation): the process's
memory as NVML reports it (`proc`, None where the driver lists no processes) and the
device's used and free memory. Tokens are fed, not sampled: the memory is what counts,
and feeding keeps the run independent of what the weights would say; `"sample": true` also runs
the engine's sampler chain over each token's logits (its token is not fed), as a reply pays it. `prefill` reads the
prompt a second time into an emptied cache and times it (the first read pays CUDA's set-up);
`generation` times the tokens after it: the speed figures. Runs in its own
process so that an out-of-memory abort in CUDA fails one measurement, not the harness.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

_SIZE_LINE = re.compile(
    r"^\s*\w+:\s+(?P<name>\S+)\s+(?P<what>model|KV|RS|output|compute) buffer size\s*=\s*(?P<mib>[0-9.]+) MiB"
)


def nvml_reader(index: int = 0) -> Callable[[], dict[str, int | None]]:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no NVIDIA driver: the run still goes through, without readings
        return lambda: {"proc": None, "used": None, "free": None}
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    pid = os.getpid()

    def read() -> dict[str, int | None]:
        mine = None
        try:
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == pid:
                    mine = int(proc.usedGpuMemory) if proc.usedGpuMemory is not None else None
        except pynvml.NVMLError:
            pass
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return {"proc": mine, "used": int(info.used), "free": int(info.free)}

    return read


def main(spec: dict[str, Any]) -> int:
    import llama_cpp

    from planner.ggml_types import ggml_type

    read = nvml_reader()
    t0 = time.perf_counter()

    def emit(step: str, **extra: Any) -> None:
        print(json.dumps({"step": step, "t": round(time.perf_counter() - t0, 3), **read(), **extra}), flush=True)

    buffers: list[dict[str, Any]] = []

    def log(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        line = text.decode("utf-8", errors="replace")
        m = _SIZE_LINE.match(line)
        if m:
            buffers.append({"name": m["name"], "what": m["what"], "mib": float(m["mib"])})
        if level == 4 or "out of memory" in line.lower():
            print(json.dumps({"step": "log", "line": line.strip()}), flush=True)

    callback = llama_cpp.llama_log_callback(log)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    emit("start")
    llama_cpp.llama_backend_init()
    mparams = llama_cpp.llama_model_default_params()
    mparams.n_gpu_layers = int(spec.get("ngl", 0))
    model = llama_cpp.llama_model_load_from_file(spec["model"].encode(), mparams)
    if not model:
        emit("failed", where="model")
        return 2
    emit("model")
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = int(spec.get("n_ctx", 4096))
    cparams.n_batch = int(spec.get("n_batch", 512))
    cparams.n_ubatch = int(spec.get("n_ubatch", 512))
    cparams.flash_attn_type = 1 if spec.get("flash_attn", True) else 0
    cparams.swa_full = bool(spec.get("swa_full", False))  # llama.cpp's default is a full-size window cache
    cparams.type_k = ggml_type(spec.get("type_k", "f16")).id
    cparams.type_v = ggml_type(spec.get("type_v", "f16")).id
    cparams.n_threads = cparams.n_threads_batch = int(spec.get("threads", 4))
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx:
        emit("failed", where="context")
        return 3
    emit("context", buffers=buffers)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    n_prompt = int(spec.get("prompt", 512))
    tokens = [(i * 7 + 300) % n_vocab for i in range(n_prompt)]
    n_batch = cparams.n_batch

    def read_prompt() -> bool:
        for start in range(0, n_prompt, n_batch):
            chunk = tokens[start : start + n_batch]
            arr = (llama_cpp.llama_token * len(chunk))(*chunk)
            if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(arr, len(chunk))) != 0:
                return False
        return True

    if not read_prompt():
        emit("failed", where="prompt")
        return 4
    emit("prompt", tokens=n_prompt)
    if spec.get("timed_prefill", True):  # the prompt again, warm (the first read pays CUDA's set-up), timed
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        t_prefill = time.perf_counter()
        if not read_prompt():
            emit("failed", where="prefill")
            return 4
        llama_cpp.llama_get_logits_ith(ctx, -1)
        emit("prefill", tokens=n_prompt, seconds=round(time.perf_counter() - t_prefill, 4))
    n_gen = int(spec.get("gen", 2000))
    one = (llama_cpp.llama_token * 1)()
    sampler = _engine_sampler(n_vocab) if spec.get("sample") else None
    t_gen = time.perf_counter()
    for i in range(n_gen):
        one[0] = (i * 13 + 301) % n_vocab
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(one, 1)) != 0:
            emit("failed", where="generation", generated=i)
            return 5
        if sampler is not None:  # the engine's chain over the logits, as a reply pays it (the token fed stays ours)
            llama_cpp.llama_sampler_accept(sampler, llama_cpp.llama_sampler_sample(sampler, ctx, -1))
    llama_cpp.llama_get_logits_ith(ctx, -1)  # waits for the last token's work
    emit("generation", tokens=n_gen, seconds=round(time.perf_counter() - t_gen, 3), sampled=sampler is not None)
    if sampler is not None:
        llama_cpp.llama_sampler_free(sampler)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    return 0


def _engine_sampler(n_vocab: int) -> Any:
    """The engine's default sampler chain (app/engine/sampler_chain.py), seeded."""
    from app.engine.sampler_chain import sampler_chain
    from app.engine.types import GenerationParams

    return sampler_chain(GenerationParams(seed=1), n_vocab)


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
