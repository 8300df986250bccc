"""llama.cpp's model and context parameters for a configuration: what the engine's loads and the
dry run share, so that both build exactly the same model and context."""

from __future__ import annotations

import ctypes
import os
import threading

from app.engine.llama_log import capture
from app.engine.types import EngineError
from planner.config import LoadConfig
from planner.ggml_types import ggml_type
from planner.units import expert_tensor_pattern

_backend_ready = False
_backend_lock = threading.Lock()
_keepalive: list[object] = []  # ctypes arrays llama.cpp keeps pointers to while a model loads


def apply_model_params(mparams, config: LoadConfig) -> None:
    """llama_model_params for `config` (the engine's loads and the dry run alike)."""
    mparams.n_gpu_layers = config.n_gpu_layers
    if not config.use_mmap:
        mparams.load_mode = 0
    mparams.use_extra_bufts = _extra_buffers(config)
    if config.tensor_split:
        split = (ctypes.c_float * 16)(*config.tensor_split[:16])
        _keepalive[:] = [split]
        mparams.tensor_split = split
    overrides = _expert_overrides(config.n_cpu_moe)
    if overrides is not None:
        mparams.tensor_buft_overrides = ctypes.cast(overrides, ctypes.c_void_p)


def apply_context_params(cparams, config: LoadConfig) -> None:
    """llama_context_params for `config`."""
    cparams.n_ctx = config.n_ctx
    cparams.n_batch = config.n_batch
    cparams.n_ubatch = config.n_ubatch
    cparams.n_seq_max = config.n_seq_max
    cparams.type_k = ggml_type(config.type_k).id
    cparams.type_v = ggml_type(config.type_v).id
    cparams.flash_attn_type = 1 if config.flash_attn else 0
    cparams.swa_full = config.swa_full
    cparams.kv_unified = config.kv_unified
    cparams.offload_kqv = config.offload_kqv
    cparams.op_offload = config.op_offload


def ensure_backend() -> None:
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            import llama_cpp

            capture()
            llama_cpp.llama_backend_init()
            _backend_ready = True


def _extra_buffers(config: LoadConfig) -> bool:
    from app.devices import ggml
    from planner.weights import uses_cpu_extra_buffers

    if config.cpu_extra_buffers is not None:
        return config.cpu_extra_buffers
    try:
        features = ggml.cpu_features()
    except Exception:  # no answer from llama.cpp: llama.cpp's own default
        return True
    return uses_cpu_extra_buffers(None, features)


class _BuftOverride(ctypes.Structure):
    """struct llama_model_tensor_buft_override { const char * pattern; ggml_backend_buffer_type_t buft; }"""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


_override_keepalive: list[object] = []


def _expert_overrides(n_cpu_moe: int):
    """Tensor overrides that keep the routed experts of the first n layers in host memory
    (what llama.cpp's --n-cpu-moe does)."""
    if n_cpu_moe <= 0:
        return None
    from app.native import library_dir, library_names

    folder = library_dir()
    name = next((n for n in library_names("ggml-cpu") if os.path.exists(os.path.join(folder, n))), None)
    if name is None:
        raise EngineError(f"--n-cpu-moe needs llama.cpp's CPU library, which is not in {folder}")
    cpu = ctypes.CDLL(os.path.join(folder, name))
    cpu.ggml_backend_cpu_buffer_type.restype = ctypes.c_void_p
    buft = cpu.ggml_backend_cpu_buffer_type()
    patterns = [expert_tensor_pattern(il).encode() for il in range(n_cpu_moe)]
    array = (_BuftOverride * (len(patterns) + 1))()
    for i, pattern in enumerate(patterns):
        array[i].pattern = pattern
        array[i].buft = buft
    array[len(patterns)].pattern = None
    array[len(patterns)].buft = None
    _override_keepalive[:] = [array, patterns, cpu]
    return array
