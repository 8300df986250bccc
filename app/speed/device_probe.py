"""How fast a GPU streams weights, timed on the device through ggml's backend API (ctypes).

Decode reads every offloaded weight once per token, so the rate a device multiplies a matrix by one
token's vector is the figure planner.speed divides by. Where no vendor library reports a memory clock
(Vulkan: AMD, Intel, and software devices such as Mesa's lavapipe), this probe measures that rate on
the device itself: an F16 matrix of MATRIX_BYTES (at most half the device's largest tensor) times one
F32 vector, computed by the device's own backend, best of REPEATS after a first run that builds the
backend's pipelines. The figure is a mat-vec's bytes per second as ggml runs it there, not the memory's
spec-sheet bandwidth: on a software device it is the CPU running the shader.

Run as `python -m app.speed.device_probe DEVICE` it prints one JSON line; the app runs it so, in a
child process (a GPU runtime must stay out of the app's process; see app/devices/ggml.py).
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from typing import Any

from app.native import GGMLUnavailable, libraries
from app.speed.probe import OthersLoad

GGML_TYPE_F32, GGML_TYPE_F16 = 0, 1
ROW = 4096  # elements per row (a typical n_embd)
MATRIX_BYTES = 64 << 20  # beyond a GPU's L2; within lavapipe's 128 MiB maxStorageBufferRange
REPEATS = 5


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


def _declare(ggml: ctypes.CDLL) -> None:
    vp, i64, size = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
    for name, restype, argtypes in (
        ("ggml_backend_dev_by_name", vp, [ctypes.c_char_p]),
        ("ggml_backend_dev_init", vp, [vp, ctypes.c_char_p]),
        ("ggml_backend_free", None, [vp]),
        ("ggml_tensor_overhead", size, []),
        ("ggml_graph_overhead", size, []),
        ("ggml_init", vp, [_InitParams]),
        ("ggml_free", None, [vp]),
        ("ggml_new_tensor_2d", vp, [vp, ctypes.c_int, i64, i64]),
        ("ggml_mul_mat", vp, [vp, vp, vp]),
        ("ggml_new_graph", vp, [vp]),
        ("ggml_build_forward_expand", None, [vp, vp]),
        ("ggml_backend_alloc_ctx_tensors", vp, [vp, vp]),
        ("ggml_backend_buffer_clear", None, [vp, ctypes.c_uint8]),
        ("ggml_backend_buffer_free", None, [vp]),
        ("ggml_backend_graph_compute", ctypes.c_int, [vp, vp]),
        ("ggml_backend_synchronize", None, [vp]),
    ):
        fn = getattr(ggml, name)
        fn.restype, fn.argtypes = restype, argtypes


def matrix_bytes(max_tensor: int | None) -> int:
    """The probe's matrix: MATRIX_BYTES, or half the device's largest tensor where that is smaller."""
    limit = MATRIX_BYTES if max_tensor is None else min(MATRIX_BYTES, max_tensor // 2)
    return max(limit // (ROW * 2), 1) * ROW * 2


def measure(device: str, n_bytes: int = MATRIX_BYTES) -> dict[str, Any]:
    """{"bandwidth": bytes per second, "bytes": the matrix, "seconds": its best mat-vec, "load": the share of
    the CPUs other programs used meanwhile (None: unknown)} on `device`. The load matters: a device driven
    from the CPU, or one that is the CPU (lavapipe), is slowed by whatever else runs there."""
    load = OthersLoad()
    ggml, _ = libraries()
    try:
        _declare(ggml)
    except AttributeError as exc:
        raise GGMLUnavailable(f"this libggml lacks the backend API: {exc}") from None
    dev = ggml.ggml_backend_dev_by_name(device.encode())
    if not dev:
        raise GGMLUnavailable(f"llama.cpp has no device named {device}")
    backend = ggml.ggml_backend_dev_init(dev, None)
    if not backend:
        raise GGMLUnavailable(f"{device} could not be started")
    rows = n_bytes // (ROW * 2)
    ctx = ggml.ggml_init(_InitParams(ggml.ggml_tensor_overhead() * 8 + ggml.ggml_graph_overhead(), None, True))
    buffer = None
    try:
        matrix = ggml.ggml_new_tensor_2d(ctx, GGML_TYPE_F16, ROW, rows)
        vector = ggml.ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ROW, 1)
        graph = ggml.ggml_new_graph(ctx)
        ggml.ggml_build_forward_expand(graph, ggml.ggml_mul_mat(ctx, matrix, vector))
        buffer = ggml.ggml_backend_alloc_ctx_tensors(ctx, backend)
        if not buffer:
            raise GGMLUnavailable(f"{device} could not hold a {n_bytes >> 20} MiB matrix")
        ggml.ggml_backend_buffer_clear(buffer, 0)
        times = []
        for _ in range(REPEATS + 1):  # the first run builds the pipelines: not counted
            start = time.perf_counter()
            if ggml.ggml_backend_graph_compute(backend, graph) != 0:
                raise GGMLUnavailable(f"{device} failed to run the probe's mat-vec")
            ggml.ggml_backend_synchronize(backend)
            times.append(time.perf_counter() - start)
        seconds = min(times[1:])
        bandwidth = rows * ROW * 2 / seconds
        return {"bandwidth": bandwidth, "bytes": rows * ROW * 2, "seconds": seconds, "load": load.share()}
    finally:
        if buffer:
            ggml.ggml_backend_buffer_free(buffer)
        ggml.ggml_free(ctx)
        ggml.ggml_backend_free(backend)


def _main() -> None:
    device = sys.argv[1]
    n_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else MATRIX_BYTES
    try:
        print(json.dumps(measure(device, n_bytes)))
    except GGMLUnavailable as exc:
        print(json.dumps({"error": str(exc)}))


if __name__ == "__main__":
    _main()
