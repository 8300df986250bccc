"""Ask llama.cpp itself how many bytes each buffer takes.

Run as a script under `LD_PRELOAD=size_shim.so` (see `oracle.py`, which builds
the shim and starts this): it loads one model once, then creates one context
per configuration read from stdin (JSON lines), and prints one JSON line per
configuration with the exact size of every buffer llama.cpp logged:

    {"model": {"CPU_Mapped": 246552576, ...},
     "kv": [{"cache": "base", "name": "CPU", "bytes": ...}, ...],
     "rs": [...], "output": {...}, "compute": {"CPU": ...}, "error": null}

With "projector" in the first line it loads a vision projector with libmtmd instead
(`projector_main`): one mtmd context per configuration, and for each the bytes of
clip's weight buffer and of its compute buffer after the warmup (and after
encoding an image, when the configuration names one).
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


def projector_main(spec: dict[str, object]) -> None:
    """Load the projector once per configuration (JSON lines on stdin), as llama-server does.

    A configuration: {"flash_attn": true|false|null (auto), "image_min_tokens": -1, "image_max_tokens": -1,
    "encode": [nx, ny] (optional: also encode one image of that size)}. The weights are the bytes of the
    buffers clip.cpp allocates for its tensors (the shim sums them); the compute buffer is clip's scheduler's
    per backend, read from the shim after the warmup and, with "encode", after the image.
    """
    from llama_cpp import mtmd_cpp

    shim = ctypes.CDLL(str(spec["shim"]))
    alloc_total = ctypes.c_size_t.in_dll(shim, "vramchat_ctx_alloc_total")
    sched_buffer = shim.vramchat_last_sched_buffer
    sched_buffer.restype = ctypes.c_size_t
    sched_buffer.argtypes = [ctypes.c_int]
    lines: list[str] = []

    def log(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        lines.append(text.decode("utf-8", errors="replace"))

    callback = llama_cpp.llama_log_callback(log)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    mtmd_cpp.mtmd_log_set(callback, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    text_model = None
    if spec.get("text_model"):
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        text_model = llama_cpp.llama_model_load_from_file(str(spec["text_model"]).encode(), mparams)
        if not text_model:
            print(json.dumps({"fatal": "text model failed to load", "log": lines[-20:]}), flush=True)
            return
    print(json.dumps({"model": {}}), flush=True)
    for raw in sys.stdin:
        cfg = json.loads(raw)
        del lines[:]
        params = mtmd_cpp.mtmd_context_params_default()
        params.use_gpu = bool(cfg.get("use_gpu", False))
        params.print_timings = False
        params.n_threads = 1
        fa = cfg.get("flash_attn")
        params.flash_attn_type = -1 if fa is None else int(bool(fa))
        params.image_min_tokens = int(cfg.get("image_min_tokens", -1))
        params.image_max_tokens = int(cfg.get("image_max_tokens", -1))
        alloc_total.value = 0
        ctx = mtmd_cpp.mtmd_init_from_file(str(spec["projector"]).encode(), text_model, params)
        result: dict[str, object] = {"config": cfg, "ok": bool(ctx)}
        if ctx:
            result["weights"] = alloc_total.value
            result["compute"] = [sched_buffer(i) for i in range(2)]
            result["flash_attn"] = any("flash attention is enabled" in line for line in lines)
            if cfg.get("encode"):
                result["encoded"] = _encode(mtmd_cpp, ctx, cfg["encode"], lines)
                result["compute_after_encode"] = [sched_buffer(i) for i in range(2)]
            mtmd_cpp.mtmd_free(ctx)
        result["errors"] = [line.strip() for line in lines if "error" in line.lower() or "failed" in line.lower()]
        if not ctx:
            result["log"] = lines[-20:]
        print(json.dumps(result), flush=True)
    if text_model:
        llama_cpp.llama_model_free(text_model)


def _encode(mtmd_cpp, ctx, size: list[int], lines: list[str]) -> dict[str, object]:
    """Tokenize one image of `size` (a grey bitmap) behind the default marker and encode its chunk."""
    nx, ny = int(size[0]), int(size[1])
    data = (ctypes.c_uint8 * (nx * ny * 3)).from_buffer_copy(bytes([128]) * (nx * ny * 3))
    bitmap = mtmd_cpp.mtmd_bitmap_init(nx, ny, data)
    chunks = mtmd_cpp.mtmd_input_chunks_init()
    marker = mtmd_cpp.mtmd_default_marker()
    text = mtmd_cpp.mtmd_input_text(marker, len(marker), False, True)
    bitmaps = (mtmd_cpp.mtmd_bitmap_p_ctypes * 1)(bitmap)
    out: dict[str, object] = {"tokenize": mtmd_cpp.mtmd_tokenize(ctx, chunks, ctypes.byref(text), bitmaps, 1)}
    for i in range(mtmd_cpp.mtmd_input_chunks_size(chunks)):
        chunk = mtmd_cpp.mtmd_input_chunks_get(chunks, i)
        if mtmd_cpp.mtmd_input_chunk_get_type(chunk) == mtmd_cpp.MTMD_INPUT_CHUNK_TYPE_IMAGE:
            out["n_tokens"] = mtmd_cpp.mtmd_input_chunk_get_n_tokens(chunk)
            out["encode"] = mtmd_cpp.mtmd_encode_chunk(ctx, chunk)
    mtmd_cpp.mtmd_input_chunks_free(chunks)
    mtmd_cpp.mtmd_bitmap_free(bitmap)
    return out


def main() -> None:
    spec = json.loads(sys.stdin.readline())
    if spec.get("projector"):
        projector_main(spec)
        return
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
