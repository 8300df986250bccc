"""llama-cpp-python's native libraries (libggml, libggml-cpu) opened through ctypes, without importing
llama_cpp (that would pull in numpy and the whole binding): the one place that finds and opens them,
for the device probes (app.devices.ggml), llama.cpp's RPC (app.rpc) and the engine (app.engine);
with them, what those three share about the build: the variable that lets a process load the GPU
backends itself, and the command that rebuilds llama-cpp-python.

The versioned file comes first: it is the one libllama links to, so the process holds one registry of
backends and what the probes read is what the engine allocates on.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from functools import lru_cache

from app.errors import VramchatError
from planner import LLAMA_CPP_VERSION

IN_PROCESS_ENV = "VRAMCHAT_GGML_IN_PROCESS"  # set in the engine and probe processes: load backends here

REINSTALL_FLAGS = {
    "cuda": "-DGGML_CUDA=on",
    "rocm": "-DGGML_HIP=on",
    "metal": "-DGGML_METAL=on",
    "vulkan": "-DGGML_VULKAN=on",
}
RPC_FLAG = "-DGGML_RPC=on"  # every build vramchat asks for keeps llama.cpp's RPC backend (--rpc, serve-rpc)


def reinstall_command(backend: str | None = None) -> str:
    """The pip command that rebuilds llama-cpp-python for a GPU backend (None: the CPU), with RPC."""
    flags = " ".join(filter(None, [REINSTALL_FLAGS.get(backend or ""), RPC_FLAG]))
    return f'CMAKE_ARGS="{flags}" pip install --force-reinstall --no-cache-dir llama-cpp-python=={LLAMA_CPP_VERSION}'


class GGMLUnavailable(VramchatError, RuntimeError):
    title = "llama.cpp's devices"
    pass


class _Caps(ctypes.Structure):
    _fields_ = [
        ("async_", ctypes.c_bool),
        ("host_buffer", ctypes.c_bool),
        ("buffer_from_host_ptr", ctypes.c_bool),
        ("events", ctypes.c_bool),
        ("mmap_support", ctypes.c_bool),
    ]


class DeviceProps(ctypes.Structure):
    """struct ggml_backend_dev_props of the pinned ggml (ggml-backend.h)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("description", ctypes.c_char_p),
        ("memory_free", ctypes.c_size_t),
        ("memory_total", ctypes.c_size_t),
        ("type", ctypes.c_int),
        ("device_id", ctypes.c_char_p),
        ("caps", _Caps),
    ]


def library_dir() -> str:
    """The folder holding llama-cpp-python's shared libraries (LLAMA_CPP_LIB_PATH wins, as in llama_cpp)."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return override
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise GGMLUnavailable("llama-cpp-python is not installed")
    return os.path.join(os.path.dirname(spec.origin), "lib")


def library_names(base: str) -> list[str]:
    """File names a ggml library may have on this platform. The versioned name comes first: it is
    the one libllama links to, and a wheel ships it as a copy rather than a link, so opening the
    plain name would load a second ggml with a registry of its own (one llama.cpp never sees)."""
    if sys.platform == "win32":
        return [f"{base}.dll", f"lib{base}.dll"]
    if sys.platform == "darwin":
        return [f"lib{base}.0.dylib", f"lib{base}.dylib", f"lib{base}.so"]
    return [f"lib{base}.so.0", f"lib{base}.so"]


def open_library(folder: str, base: str, mode: int = ctypes.DEFAULT_MODE) -> ctypes.CDLL:
    errors = []
    for name in library_names(base):
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            errors.append(f"{name} not found")
            continue
        try:
            return ctypes.CDLL(path, mode=mode)
        except OSError as exc:
            errors.append(str(exc))
    raise OSError("; ".join(errors))


def _declare_device_api(ggml: ctypes.CDLL) -> None:
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    ggml.ggml_backend_dev_count.restype = ctypes.c_size_t
    ggml.ggml_backend_dev_get.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    ggml.ggml_backend_dev_name.restype = ctypes.c_char_p
    ggml.ggml_backend_dev_name.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_dev_type.restype = ctypes.c_int
    ggml.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_dev_memory.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    ggml.ggml_backend_dev_memory.restype = None
    ggml.ggml_backend_dev_get_props.argtypes = [ctypes.c_void_p, ctypes.POINTER(DeviceProps)]
    ggml.ggml_backend_dev_get_props.restype = None
    ggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
    ggml.ggml_backend_load_all_from_path.restype = None


@lru_cache(maxsize=1)
def libraries() -> tuple[ctypes.CDLL, ctypes.CDLL | None]:
    folder = library_dir()
    try:
        ggml = open_library(folder, "ggml", mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise GGMLUnavailable(f"cannot load libggml from {folder}: {exc}") from None
    try:
        _declare_device_api(ggml)
    except AttributeError as exc:
        raise GGMLUnavailable(f"this libggml lacks the device API: {exc}") from None
    if ggml.ggml_backend_reg_count() == 0:
        # a build with backends as loadable modules (GGML_BACKEND_DL): load them as llama_backend_init
        # would, from the folder they ship in
        ggml.ggml_backend_load_all_from_path(folder.encode())
    try:
        cpu: ctypes.CDLL | None = open_library(folder, "ggml-cpu")
    except OSError:
        cpu = None
    return ggml, cpu
