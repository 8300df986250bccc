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
import functools
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from app.native import GGMLUnavailable, libraries
from app.speed.probe import OthersLoad

Timed = TypeVar("Timed")
GGML_TYPE_F32, GGML_TYPE_F16 = 0, 1
ROW = 4096  # elements per row (a typical n_embd)
MATRIX_BYTES = 64 << 20  # beyond a GPU's L2; within lavapipe's 128 MiB maxStorageBufferRange
REPEATS = 5
# the weight types whose mat-vec is timed on the device (a quantized type's shader dequantizes as it reads:
# on lavapipe a q4_K matrix streams at a fraction of an F16 one's bytes per second); others take the
# nearest (planner.speed.machine.DEVICE_FALLBACK)
TYPES = ("f16", "q8_0", "q4_0", "q5_0", "q4_K", "q5_K", "q6_K")
TYPE_IDS = {"f16": 1, "q4_0": 2, "q5_0": 6, "q8_0": 8, "q4_K": 12, "q5_K": 13, "q6_K": 14}
N_OPS = 256  # additions in the graph that times a device's cost per operation


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
        ("ggml_new_tensor_1d", vp, [vp, ctypes.c_int, i64]),
        ("ggml_row_size", size, [ctypes.c_int, i64]),
        ("ggml_add", vp, [vp, vp, vp]),
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
    """{"bandwidth": bytes per second of an F16 mat-vec, "bytes": its matrix, "seconds": its best run,
    "type_rates": bytes per second of each weight type's mat-vec (TYPES, on a matrix a quarter the size),
    "graph_seconds" and "op_seconds": a one-operation graph and each further operation, "load": the share
    of the CPUs other programs used meanwhile (None: unknown)} on `device`. The load matters: a device
    driven from the CPU, or one that is the CPU (lavapipe), is slowed by whatever else runs there."""
    load = OthersLoad()
    ggml, _ = libraries()
    try:
        _declare(ggml)
    except AttributeError as exc:
        raise GGMLUnavailable(f"this libggml lacks the backend API: {exc}") from None
    dev = ggml.ggml_backend_dev_by_name(device.encode())
    if not dev:
        raise GGMLUnavailable(f"llama.cpp has no device named {device}")
    n_bytes, seconds = _on_backend(ggml, dev, device, lambda backend: _mat_vec(ggml, backend, device, "f16", n_bytes))
    rates = {"f16": n_bytes / seconds}
    for name in TYPES:
        if name not in rates:
            size, took = _on_backend(ggml, dev, device, functools.partial(_quarter, ggml, device, name, n_bytes))
            rates[name] = size / took
    start, per_op = _on_backend(ggml, dev, device, lambda backend: _op_seconds(ggml, backend, device))
    return {
        "bandwidth": n_bytes / seconds,
        "bytes": n_bytes,
        "seconds": seconds,
        "type_rates": rates,
        "graph_seconds": start,
        "op_seconds": per_op,
        "load": load.share(),
    }


def _quarter(ggml: ctypes.CDLL, device: str, name: str, n_bytes: int, backend: int) -> tuple[int, float]:
    return _mat_vec(ggml, backend, device, name, n_bytes // 4)


def _on_backend(ggml: ctypes.CDLL, dev: int, device: str, timing: Callable[[int], Timed]) -> Timed:
    """`timing` on a backend of its own: ggml-vulkan keeps state between graphs, and a graph run after
    another's tensors were freed crashed it ("corrupted double-linked list")."""
    backend = ggml.ggml_backend_dev_init(dev, None)
    if not backend:
        raise GGMLUnavailable(f"{device} could not be started")
    try:
        return timing(backend)
    finally:
        ggml.ggml_backend_free(backend)


def _mat_vec(ggml: ctypes.CDLL, backend: int, device: str, name: str, n_bytes: int) -> tuple[int, float]:
    """(bytes, best seconds) of one mat-vec of a `name` matrix of about `n_bytes` on the device (zeros: a
    shader does the same work whatever the values)."""
    type_id = TYPE_IDS[name]
    row = ggml.ggml_row_size(type_id, ROW)
    rows = max(n_bytes // row, 1)
    ctx = ggml.ggml_init(_InitParams(ggml.ggml_tensor_overhead() * 8 + ggml.ggml_graph_overhead(), None, True))
    buffer = None
    try:
        matrix = ggml.ggml_new_tensor_2d(ctx, type_id, ROW, rows)
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
                raise GGMLUnavailable(f"{device} failed to run the probe's {name} mat-vec")
            ggml.ggml_backend_synchronize(backend)
            times.append(time.perf_counter() - start)
        return rows * row, min(times[1:])
    finally:
        if buffer:
            ggml.ggml_backend_buffer_free(buffer)
        ggml.ggml_free(ctx)


def _op_seconds(ggml: ctypes.CDLL, backend: int, device: str) -> tuple[float, float]:
    """(a one-operation graph's seconds, what each further operation adds) on the device: a token's graph
    runs hundreds of small operations, and a device's cost per operation decides a small model's speed (a
    CUDA graph's kernel takes microseconds; lavapipe's dispatch, on the CPU, far more)."""
    times = {}
    for n_ops in (1, N_OPS):
        ctx = ggml.ggml_init(
            _InitParams(ggml.ggml_tensor_overhead() * (n_ops + 4) + ggml.ggml_graph_overhead(), None, True)
        )
        buffer = None
        try:
            a = ggml.ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 256)
            x = a
            for _ in range(n_ops):
                x = ggml.ggml_add(ctx, x, a)
            graph = ggml.ggml_new_graph(ctx)
            ggml.ggml_build_forward_expand(graph, x)
            buffer = ggml.ggml_backend_alloc_ctx_tensors(ctx, backend)
            if not buffer:
                raise GGMLUnavailable(f"{device} could not hold the probe's {n_ops} additions")
            ggml.ggml_backend_buffer_clear(buffer, 0)
            best = float("inf")
            for _ in range(REPEATS + 1):
                started = time.perf_counter()
                if ggml.ggml_backend_graph_compute(backend, graph) != 0:
                    raise GGMLUnavailable(f"{device} failed to run the probe's additions")
                ggml.ggml_backend_synchronize(backend)
                best = min(best, time.perf_counter() - started)
            times[n_ops] = best
        finally:
            if buffer:
                ggml.ggml_backend_buffer_free(buffer)
            ggml.ggml_free(ctx)
    return times[1], max(0.0, (times[N_OPS] - times[1]) / (N_OPS - 1))


def _main() -> None:
    device = sys.argv[1]
    n_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else MATRIX_BYTES
    try:
        print(json.dumps(measure(device, n_bytes)))
    except GGMLUnavailable as exc:
        print(json.dumps({"error": str(exc)}))


if __name__ == "__main__":
    _main()
