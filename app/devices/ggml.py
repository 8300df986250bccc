"""What llama.cpp itself sees: the ggml device API of the libggml that llama-cpp-python ships.

Loaded through ctypes straight from the llama_cpp package folder, without
importing llama_cpp (that would pull in numpy and the whole binding).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from dataclasses import dataclass
from functools import lru_cache

DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}


@dataclass(frozen=True)
class GGMLDevice:
    name: str
    description: str
    type: str  # cpu, gpu, igpu, accel
    free: int
    total: int

    @property
    def backend(self) -> str:
        lowered = self.name.lower()
        for prefix, backend in (("cuda", "cuda"), ("rocm", "rocm"), ("hip", "rocm"), ("metal", "metal"),
                                ("vulkan", "vulkan"), ("mtl", "metal")):
            if lowered.startswith(prefix):
                return backend
        return "cpu" if self.type == "cpu" else "vulkan"


class GGMLUnavailable(RuntimeError):
    pass


def library_dir() -> str:
    """The folder holding llama-cpp-python's shared libraries (LLAMA_CPP_LIB_PATH wins)."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return override
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise GGMLUnavailable("llama-cpp-python is not installed")
    return os.path.join(os.path.dirname(spec.origin), "lib")


@lru_cache(maxsize=1)
def _libs() -> tuple[ctypes.CDLL, ctypes.CDLL | None]:
    folder = library_dir()
    try:
        ggml = ctypes.CDLL(os.path.join(folder, "libggml.so"), mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise GGMLUnavailable(f"cannot load libggml from {folder}: {exc}") from None
    try:
        cpu = ctypes.CDLL(os.path.join(folder, "libggml-cpu.so"))
    except OSError:
        cpu = None
    ggml.ggml_backend_dev_count.restype = ctypes.c_size_t
    ggml.ggml_backend_dev_get.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    for fn in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(ggml, fn).restype = ctypes.c_char_p
        getattr(ggml, fn).argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_dev_type.restype = ctypes.c_int
    ggml.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                             ctypes.POINTER(ctypes.c_size_t)]
    if hasattr(ggml, "ggml_backend_load_all_from_path"):
        # backends built as loadable modules (GGML_BACKEND_DL) live beside libggml
        ggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
    return ggml, cpu


def list_devices() -> list[GGMLDevice]:
    """Every device llama.cpp would use, with its free and total memory."""
    ggml, _ = _libs()
    out = []
    for i in range(ggml.ggml_backend_dev_count()):
        dev = ggml.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        ggml.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        out.append(GGMLDevice(
            name=(ggml.ggml_backend_dev_name(dev) or b"?").decode(errors="replace"),
            description=(ggml.ggml_backend_dev_description(dev) or b"").decode(errors="replace"),
            type=DEVICE_TYPES.get(ggml.ggml_backend_dev_type(dev), "unknown"),
            free=free.value,
            total=total.value,
        ))
    return out


_FEATURES = ("avx", "avx2", "avx512", "fma", "f16c", "neon", "dotprod", "matmul_int8", "sve", "avx512_vnni")


def cpu_features() -> frozenset[str]:
    """The SIMD features the CPU backend was built for and runs with (ggml_cpu_has_*)."""
    _, cpu = _libs()
    if cpu is None:
        return frozenset()
    found = set()
    for feature in _FEATURES:
        fn = getattr(cpu, f"ggml_cpu_has_{feature}", None)
        if fn is not None and fn():
            found.add("i8mm" if feature == "matmul_int8" else feature)
    return frozenset(found)
