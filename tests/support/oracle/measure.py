"""Ask llama.cpp itself how many bytes each buffer takes.

Run as a script under `LD_PRELOAD=size_shim.so` (see `oracle.py`, which builds
the shim and starts this): it loads one model once, then creates one context
per configuration read from stdin (JSON lines), and prints one JSON line per
configuration with the exact size of every buffer llama.cpp logged:

    {"model": {"CPU_Mapped": 246552576, ...},
     "kv": [{"cache": "base", "name": "CPU", "bytes": ...}, ...],
     "rs": [...], "output": {...}, "compute": {"CPU": ...}, "error": null}
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
from pathlib import Path

import llama_cpp

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the planner, run as a script or not
from planner.ggml_types import ggml_type

_BUFFER_LINE = re.compile(r"^\s*(?P<func>\w+):\s+(?P<name>\S+)\s+(?P<what>model|KV|RS|output|compute) buffer size")


class _Collector:
    def __init__(self, shim: ctypes.CDLL) -> None:
        self.last_buffer = ctypes.c_size_t.in_dll(shim, "vramchat_last_buffer_size")
        self.last_sched = ctypes.c_size_t.in_dll(shim, "vramchat_last_sched_size")
        self.reset()
        self.model: dict[str, int] = {}
        self.lines: list[str] = []

    def reset(self) -> None:
        self.kv: list[dict[str, object]] = []
        self.rs: list[dict[str, object]] = []
        self.output: dict[str, int] = {}
        self.compute: dict[str, int] = {}
        self.cache = "base"
        self.errors: list[str] = []

    def __call__(self, level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        line = text.decode("utf-8", errors="replace")
        self.lines.append(line)
        lowered = line.lower()
        if level == 4 or "error" in lowered or "failed" in lowered:
            self.errors.append(line.strip())
        if "creating non-SWA KV cache" in line:
            self.cache = "base"
        elif "creating     SWA KV cache" in line:
            self.cache = "swa"
        match = _BUFFER_LINE.match(line)
        if not match:
            return
        name, what = match["name"], match["what"]
        if what == "model":
            self.model[name] = self.model.get(name, 0) + self.last_buffer.value
        elif what == "KV":
            self.kv.append({"cache": self.cache, "name": name, "bytes": self.last_buffer.value})
        elif what == "RS":
            self.rs.append({"name": name, "bytes": self.last_buffer.value})
        elif what == "output":
            self.output[name] = self.last_buffer.value
        elif what == "compute":
            self.compute[name] = self.last_sched.value


def main() -> None:
    spec = json.loads(sys.stdin.readline())
    shim = ctypes.CDLL(spec["shim"])
    collector = _Collector(shim)
    callback = llama_cpp.llama_log_callback(collector)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    if spec.get("rpc"):  # RPC servers' devices, first in llama.cpp's list, as with llama.cpp's --rpc
        from app.rpc.client import add_servers
        from app.rpc.endpoint import parse_endpoints

        add_servers(parse_endpoints(",".join(spec["rpc"])))

    mparams = llama_cpp.llama_model_default_params()
    mparams.n_gpu_layers = spec.get("n_gpu_layers", 0)
    split = spec.get("tensor_split") or []
    if split:
        weights = (ctypes.c_float * 128)(*split)  # llama_max_devices() floats; kept alive below
        mparams.tensor_split = ctypes.cast(weights, ctypes.POINTER(ctypes.c_float))
    if not spec.get("use_mmap", True):
        mparams.load_mode = 0
    mparams.use_extra_bufts = bool(spec.get("use_extra_bufts", True))
    model = llama_cpp.llama_model_load_from_file(spec["model"].encode(), mparams)
    if not model:
        print(json.dumps({"fatal": "model failed to load", "log": collector.lines[-20:]}), flush=True)
        return
    print(json.dumps({"model": collector.model}), flush=True)

    for raw in sys.stdin:
        cfg = json.loads(raw)
        collector.reset()
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = cfg["n_ctx"]
        cparams.n_batch = cfg.get("n_batch", 512)
        cparams.n_ubatch = cfg.get("n_ubatch", 512)
        cparams.n_seq_max = cfg.get("n_seq_max", 1)
        cparams.flash_attn_type = 1 if cfg.get("flash_attn") else 0
        cparams.type_k = ggml_type(cfg.get("type_k", "f16")).id
        cparams.type_v = ggml_type(cfg.get("type_v", "f16")).id
        cparams.swa_full = bool(cfg.get("swa_full", False))
        cparams.kv_unified = bool(cfg.get("kv_unified", False))
        cparams.n_threads = cparams.n_threads_batch = 1
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        result = {
            "config": cfg,
            "ok": bool(ctx),
            "kv": collector.kv,
            "rs": collector.rs,
            "output": collector.output,
            "compute": collector.compute,
            "errors": collector.errors,
        }
        if ctx:
            llama_cpp.llama_free(ctx)
        print(json.dumps(result), flush=True)
    llama_cpp.llama_model_free(model)


if __name__ == "__main__":
    main()
