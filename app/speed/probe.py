"""How fast this CPU runs llama.cpp's kernels: a short probe through ggml itself (ctypes).

Decode on a CPU is not bound by memory bandwidth alone: on a few cores, dequantising each
block costs more than reading it, so a q4_0 matrix streams at a fraction of a q8_0 one's
bytes per second. The probe therefore times ggml's own mat-vec (one token, as decode runs
it) for each weight type, with the thread count the engine uses, plus what every decoded
token pays whatever its size: the graph's start (waking the threads), one
synchronisation of the threads per operation, and what a mat-mul adds to that (its input
converted first, a second synchronisation; timed on 32 small mat-vecs). A mat-mul of a 128-token batch per type
gives prefill's arithmetic rate, at three widths (128, 1024 and 4096 weights a row), and the
operations between the mat-muls are timed per element (a rotary embedding, a norm, an add).
The per-type matrices (8 MiB) may sit in a large cache, so
the same q8_0 mat-vec is timed on 192 MiB too, a matrix no cache holds, with rows 4096 and
512 wide: the ratio to the in-cache rate is how much slower weights stream from memory, and
the difference between the two widths what each row streamed costs besides its bytes.
Attention is timed at the head widths models use (32 to 256), and over cells a mask hides.
One large f32 read is the memory's plain read rate with the engine's threads (reported beside;
the per-type rates decide).

Every figure is the best of several short runs (another process on the machine slows a
run, it never speeds one up), taken in rounds: each round times every type once, so that a
stretch of time another program held the cores lands on one round of a type, not on all its
runs. The share of the CPUs other processes used meanwhile is reported beside the figures
(psutil); app/speed/trust.py judges from it and from the figures themselves whether the
probe was disturbed. `measure()` takes about half a second on 2 quiet cores; the app keeps
a trusted result per machine (app/speed/machine.py), so a plan pays for it once.

Run as `python -m app.speed.probe [--full]` it prints the figures as one JSON line (`--full`: all of
them, however busy the machine): the
app runs it so where llama.cpp has a GPU backend (the GPU's runtime must stay out of the
app's process; see app/devices/ggml.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from app.native import GGMLUnavailable, libraries
from app.speed.sampler_probe import sampler_entry_seconds
from app.speed.work_buffer import engine_work_buffer
from planner.speed.timing import FA_TILE_CELLS  # the cells ggml-cpu's tiled attention skips at once

# ggml_type ids of the pinned ggml (ggml.h)
TYPE_IDS = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "q2_K": 10,
    "q3_K": 11,
    "q4_K": 12,
    "q5_K": 13,
    "q6_K": 14,
    "iq4_nl": 20,
    "iq4_xs": 23,
    "bf16": 30,
    "mxfp4": 39,
}
DECODE_TYPES = tuple(TYPE_IDS)
PREFILL_TYPES = ("f16", "q8_0", "q4_0", "q5_0", "q4_K", "q6_K")
ROW = 4096  # elements per row of the probe's matrices (a typical n_embd)
SHORT_ROW = 512  # the short rows of a small model (the demo's are 640 wide): their per-row cost
DECODE_BYTES = 8 << 20  # per type: beyond a core's L2, within the last level (planner.speed.machine.SMALL_SET)
BANDWIDTH_BYTES = 192 << 20  # beyond most caches (a desktop's L3 is 32-128 MiB); planner.speed.machine.LARGE_SET
PREFILL_ROWS = 256
# a prompt's mat-mul runs at a rate that depends on the matrix's width as much as on its type (on 2 EPYC
# cores a q8_0 one at 156 GFLOP/s 4096 wide, 279 at 1024, 230 at 128; an f16 one at 387, 389, 128): the
# same weights are timed at these widths too, beside ROW
PREFILL_WIDTHS = (128, 1024)
SHORT_BATCH = 32  # a chat turn's prompt: a mat-mul of this few tokens runs slower (timed 1024 wide)
# and slower still over a real model's weights, which no cache holds: read from memory for every batch (a
# q5_0 one 640 wide at 206 GFLOP/s in cache, 180 over 46 MB; q8_0 282 and 204): timed over this many bytes
SHORT_BATCH_BEYOND_BYTES = 64 << 20
QK_K = 256  # the weights of a K-quant block (ggml-common.h)
PREFILL_TOKENS = 128
N_OPS = 256  # tiny operations in the graph that times one synchronisation
# a mat-mul pays more than another operation besides its bytes: its input is converted to the weights' dot
# type first (a second synchronisation of the threads) and its rows are handed out in chunks. Timed on this
# many small mat-vecs (SMALL_MATRIX weights wide and rows long, q8_0), the size of a tiny model's
SMALL_MATRICES = 32
SMALL_MATRIX = (128, 64)
# head sizes attention is timed at: ggml's kernel runs a head in SIMD steps of 32 or 64 (AVX2, AVX-512)
# and the rest one by one, so a width of 32 costs three times a width of 64 on an AVX-512 CPU
ATTENTION_WIDTHS = (32, 64, 80, 96, 128, 192, 256)
ATTENTION_CELLS = 4096
ATTENTION_HEADS, ATTENTION_KV_HEADS = 8, 2
PREFILL_ATTENTION_CELLS = 512  # a prompt's batch of PREFILL_TOKENS queries over this many cells
HIDDEN_WIDTH = 64  # the head width the hidden cells are timed at (their cost is the mask's, not the head's)
MASK_CELLS = 4096  # the view a prompt's mask is timed over (8x planner.speed.timing.MASK_SHORT_VIEW)
# a token's attention over a KV cache that comes from memory rather than the caches (a real model's, whose
# weights and other layers' caches pass between): what each cell then adds depends on how far apart one KV
# head's rows lie, llama.cpp keeping every head's K (and V) of a cell in one row. Timed in that layout over
# BANDWIDTH_BYTES of caches against one layer's cache repeated (2 EPYC cores, per cell and query head:
# 128 wide, 8 KV heads: 9 ns in cache, 40 from memory; 4 KV heads 10 and 31; 2 KV heads 9 and 11)
STREAMED_WIDTHS = (64, 128, 256)
STREAMED_KV_HEADS = (1, 2, 4, 8)
STREAMED_HEADS = 8  # query heads a layer (planner.speed.machine.STREAMED_HEADS)
STREAMED_CELLS = 2048
STREAMED_LAYERS = 128  # at most (a narrow cache's layers are small)
REPEATS = 5
F16_MINUS_INFINITY = 0xFC00  # the f16 bits of -inf: a cell the mask hides
ROUNDS = 3  # rounds of the per-type rates (each of ROUND_REPEATS runs a type)
ROUND_REPEATS = 2


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class _ComputePlan(ctypes.Structure):
    """ggml-cpu.h's `struct ggml_cplan`: the work buffer a graph needs for a number of threads."""

    _fields_ = [
        ("work_size", ctypes.c_size_t),
        ("work_data", ctypes.c_void_p),
        ("n_threads", ctypes.c_int),
        ("threadpool", ctypes.c_void_p),
        ("abort_callback", ctypes.c_void_p),
        ("abort_callback_data", ctypes.c_void_p),
        ("use_ref", ctypes.c_bool),
    ]


def _declare(ggml: ctypes.CDLL, cpu: ctypes.CDLL) -> None:
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    for name, args, res in (
        ("ggml_init", [_InitParams], p),
        ("ggml_free", [p], None),
        ("ggml_new_tensor_1d", [p, ctypes.c_int, i64], p),
        ("ggml_new_tensor_2d", [p, ctypes.c_int, i64, i64], p),
        ("ggml_new_tensor_3d", [p, ctypes.c_int, i64, i64, i64], p),
        ("ggml_view_3d", [p, p, i64, i64, i64, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t], p),
        ("ggml_flash_attn_ext", [p, p, p, p, p, ctypes.c_float, ctypes.c_float, ctypes.c_float], p),
        ("ggml_mul_mat", [p, p, p], p),
        ("ggml_add", [p, p, p], p),
        ("ggml_rms_norm", [p, p, ctypes.c_float], p),
        ("ggml_geglu_split", [p, p, p], p),
        ("ggml_rope_ext", [p, p, p, p, ctypes.c_int, ctypes.c_int, ctypes.c_int, *[ctypes.c_float] * 6], p),
        ("ggml_new_graph_custom", [p, ctypes.c_size_t, ctypes.c_bool], p),
        ("ggml_build_forward_expand", [p, p], None),
        ("ggml_get_data", [p], p),
        ("ggml_row_size", [ctypes.c_int, i64], ctypes.c_size_t),
        ("ggml_tensor_overhead", [], ctypes.c_size_t),
        ("ggml_graph_overhead_custom", [ctypes.c_size_t, ctypes.c_bool], ctypes.c_size_t),
        ("ggml_quantize_chunk", [ctypes.c_int, p, p, i64, i64, i64, p], ctypes.c_size_t),
        ("ggml_quantize_requires_imatrix", [ctypes.c_int], ctypes.c_bool),
    ):
        fn = getattr(ggml, name)
        fn.argtypes, fn.restype = args, res
    cpu.ggml_graph_plan.argtypes, cpu.ggml_graph_plan.restype = [p, ctypes.c_int, p], _ComputePlan
    cpu.ggml_graph_compute.argtypes = [p, ctypes.POINTER(_ComputePlan)]
    cpu.ggml_graph_compute.restype = ctypes.c_int
    cpu.ggml_cpu_init.argtypes, cpu.ggml_cpu_init.restype = [], None


def _tile(base: int, seed: Any, total: int) -> None:
    """Fill `total` bytes at `base` with copies of `seed`: doubling memmoves fill hundreds of MiB in a few."""
    done = min(len(seed), total)
    ctypes.memmove(base, seed, done)
    while done < total:
        step = min(done, total - done)
        ctypes.memmove(base + done, base, step)
        done += step


def _repack_buffer_type(ggml: ctypes.CDLL, cpu: ctypes.CDLL) -> tuple[int, int] | None:
    """(buffer type, device) of ggml-cpu's CPU_REPACK, where llama.cpp keeps the host weights it repacks
    for this CPU's SIMD (planner.weights: `repacked`); None where this build has none."""
    p = ctypes.c_void_p
    try:
        for lib, name, args, res in (
            (cpu, "ggml_backend_cpu_reg", [], p),
            (ggml, "ggml_backend_reg_get_proc_address", [p, ctypes.c_char_p], p),
            (ggml, "ggml_backend_reg_dev_get", [p, ctypes.c_size_t], p),
            (ggml, "ggml_backend_buft_name", [p], ctypes.c_char_p),
            (ggml, "ggml_backend_alloc_ctx_tensors_from_buft", [p, p], p),
            (ggml, "ggml_backend_tensor_set", [p, p, ctypes.c_size_t, ctypes.c_size_t], None),
            (ggml, "ggml_backend_buffer_free", [p], None),
            (ggml, "ggml_backend_dev_supports_op", [p, p], ctypes.c_bool),
        ):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
    except AttributeError:
        return None
    reg = cpu.ggml_backend_cpu_reg()
    address = ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts") if reg else None
    if not address:
        return None
    device = ggml.ggml_backend_reg_dev_get(reg, 0)
    extra = ctypes.CFUNCTYPE(ctypes.POINTER(p), p)(address)(device)
    index = 0
    while extra and extra[index]:
        if ggml.ggml_backend_buft_name(extra[index]) == b"CPU_REPACK":
            return int(extra[index]), int(device)
        index += 1
    return None


class _Probe:
    def __init__(self, threads: int) -> None:
        ggml, cpu = libraries()
        if cpu is None:
            raise GGMLUnavailable("llama-cpp-python ships no CPU backend library (libggml-cpu)")
        try:
            _declare(ggml, cpu)
        except AttributeError as exc:
            raise GGMLUnavailable(f"this libggml lacks a function the speed probe needs: {exc}") from None
        cpu.ggml_cpu_init()
        self.ggml, self.cpu, self.threads = ggml, cpu, threads
        self.repack = _repack_buffer_type(ggml, cpu)
        rng = random.Random(1234)
        self.source = (ctypes.c_float * (4 * ROW))(*(rng.gauss(0.0, 0.02) for _ in range(4 * ROW)))

    def _context(self, data_bytes: int, n_tensors: int, graph_size: int = 64) -> int:
        g = self.ggml
        # the graph's work buffer is sized by ggml for the threads and allocated apart (_time_graph)
        size = data_bytes + n_tensors * (g.ggml_tensor_overhead() + 64)
        size += g.ggml_graph_overhead_custom(graph_size, False)
        ctx = g.ggml_init(_InitParams(size, None, False))
        if not ctx:
            raise MemoryError(f"ggml could not allocate {size} bytes for the speed probe")
        return int(ctx)

    def _fill(self, tensor: int, type_id: int, rows: int, cols: int) -> None:
        """Real values of the type (4 quantized rows, tiled): timing must not see pages never written."""
        self._fill_at(int(self.ggml.ggml_get_data(tensor)), type_id, rows, cols)

    def _fill_at(self, base: int, type_id: int, rows: int, cols: int) -> None:
        g = self.ggml
        row = g.ggml_row_size(type_id, cols)
        seed = ctypes.create_string_buffer(4 * row)
        if type_id == TYPE_IDS["f32"]:
            ctypes.memmove(seed, self.source, 4 * row)
        else:
            g.ggml_quantize_chunk(type_id, self.source, seed, 0, 4, cols, None)
        _tile(base, seed, rows * row)

    @contextlib.contextmanager
    def _matrix(self, ctx: int, type_id: int, width: int, rows: int, repacked: bool) -> Iterator[int | None]:
        """A `width` x `rows` matrix of the type filled with real values: in `ctx`, or (`repacked`) in
        CPU_REPACK as llama.cpp would load it, None where ggml does not repack this type on this CPU."""
        g = self.ggml
        if not repacked:
            w = g.ggml_new_tensor_2d(ctx, type_id, width, rows)
            self._fill(w, type_id, rows, width)
            yield w
            return
        if self.repack is None:
            yield None
            return
        buffer_type, device = self.repack
        meta = g.ggml_init(_InitParams(4 * (g.ggml_tensor_overhead() + 64), None, True))
        buffer = None
        try:
            w = g.ggml_new_tensor_2d(meta, type_id, width, rows)
            buffer = g.ggml_backend_alloc_ctx_tensors_from_buft(meta, buffer_type)
            x = g.ggml_new_tensor_2d(meta, TYPE_IDS["f32"], width, 1)  # after: in no buffer, as ggml asks
            # the buffer keeps a weight ggml has no repacked kernel for on this CPU as it is: not one to time
            if not buffer or not g.ggml_backend_dev_supports_op(device, g.ggml_mul_mat(meta, w, x)):
                yield None
                return
            size = g.ggml_row_size(type_id, width) * rows
            host = ctypes.create_string_buffer(size)
            self._fill_at(ctypes.addressof(host), type_id, rows, width)
            g.ggml_backend_tensor_set(w, host, 0, size)  # repacked as it is set
            del host
            yield w
        finally:
            if buffer:
                g.ggml_backend_buffer_free(buffer)
            g.ggml_free(meta)

    def _time_graph(self, ctx: int, out: int | list[int], graph_size: int = 64, repeats: int = REPEATS) -> float:
        """The best of `repeats` runs of the graph that computes `out` (one tensor, or several run in turn)."""
        g = self.ggml
        graph = g.ggml_new_graph_custom(ctx, graph_size, False)
        for tensor in out if isinstance(out, list) else [out]:
            g.ggml_build_forward_expand(graph, tensor)
        # the work buffer grows with the threads (flash attention keeps one per thread): ggml sizes it
        plan = self.cpu.ggml_graph_plan(graph, self.threads, None)
        _work, plan.work_data = engine_work_buffer(max(1, plan.work_size))  # placed as llama.cpp's own; kept alive
        self._compute(graph, plan)  # warm: pages, code, thread start
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            self._compute(graph, plan)
            best = min(best, time.perf_counter() - t0)
        return best

    def _compute(self, graph: int, plan: _ComputePlan) -> None:
        status = self.cpu.ggml_graph_compute(graph, ctypes.byref(plan))
        if status != 0:
            raise RuntimeError(f"ggml could not run the speed probe's graph (status {status})")

    def graph_start(self) -> float:
        """Seconds a graph of one tiny operation takes: the thread pool's start and end."""
        g = self.ggml
        ctx = self._context(4096, 4)
        try:
            a = g.ggml_new_tensor_1d(ctx, TYPE_IDS["f32"], 16)
            ctypes.memset(g.ggml_get_data(a), 0, 64)
            return self._time_graph(ctx, g.ggml_add(ctx, a, a), repeats=2 * REPEATS)
        finally:
            g.ggml_free(ctx)

    def per_op(self) -> float:
        """Seconds each operation adds: one synchronisation of the threads, little work (the graph's
        start is spread over its 256 operations: subtracting it would let one slow start make it 0)."""
        g = self.ggml
        ctx = self._context(N_OPS * 256, N_OPS + 4, 2 * N_OPS)
        try:
            a = g.ggml_new_tensor_1d(ctx, TYPE_IDS["f32"], 16)
            ctypes.memset(g.ggml_get_data(a), 0, 64)
            x = a
            for _ in range(N_OPS):
                x = g.ggml_add(ctx, x, a)
            return self._time_graph(ctx, x, 2 * N_OPS) / N_OPS
        finally:
            g.ggml_free(ctx)

    def small_mat_vecs(self) -> tuple[float, int]:
        """(seconds, bytes) of one of SMALL_MATRICES small q8_0 mat-vecs run as one graph: what a mat-mul
        costs whatever its size (beside per_op, which a mat-mul pays too) and the bytes it read."""
        g = self.ggml
        q8_0, f32 = TYPE_IDS["q8_0"], TYPE_IDS["f32"]
        width, rows = SMALL_MATRIX
        row = g.ggml_row_size(q8_0, width)
        n = SMALL_MATRICES
        ctx = self._context(n * (rows * row + rows * 4) + width * 4, n * 2 + 2, 4 * n)
        try:
            x = g.ggml_new_tensor_1d(ctx, f32, width)
            ctypes.memmove(g.ggml_get_data(x), self.source, width * 4)
            products = []
            for _ in range(n):
                w = g.ggml_new_tensor_2d(ctx, q8_0, width, rows)
                self._fill(w, q8_0, rows, width)
                products.append(g.ggml_mul_mat(ctx, w, x))
            return self._time_graph(ctx, products, 4 * n, repeats=ROUND_REPEATS) / n, rows * row
        finally:
            g.ggml_free(ctx)

    def decode_rate(
        self, name: str, nbytes: int, repeats: int = REPEATS, width: int = ROW, repacked: bool = False
    ) -> float | None:
        """Bytes per second ggml's mat-vec streams a matrix of this type, rows of `width` weights (None:
        the type cannot be made here; `repacked`: in CPU_REPACK, None where it is not repacked here)."""
        timed = self.mat_vec(name, nbytes, repeats, width, repacked)
        return timed[0] / timed[1] if timed else None

    def mat_vec(
        self, name: str, nbytes: int, repeats: int = REPEATS, width: int = ROW, repacked: bool = False
    ) -> tuple[int, float, int] | None:
        """(bytes, seconds, rows) of ggml's mat-vec over a matrix of about `nbytes` of this type."""
        g = self.ggml
        type_id = TYPE_IDS[name]
        if g.ggml_quantize_requires_imatrix(type_id):
            return None
        row = g.ggml_row_size(type_id, width)
        rows = max(64, nbytes // row) // 16 * 16
        ctx = self._context((0 if repacked else rows * row) + 3 * width * 4 + rows * 4, 4)
        try:
            with self._matrix(ctx, type_id, width, rows, repacked) as w:
                if w is None:
                    return None
                x = g.ggml_new_tensor_1d(ctx, TYPE_IDS["f32"], width)
                ctypes.memmove(g.ggml_get_data(x), self.source, width * 4)
                seconds = self._time_graph(ctx, g.ggml_mul_mat(ctx, w, x), repeats=repeats)
                return (rows * row, seconds, rows) if seconds > 0 else None
        finally:
            g.ggml_free(ctx)

    def beyond_cache(self) -> tuple[float, float] | None:
        """(bytes/s, seconds a row) of a q8_0 mat-vec over a matrix no cache holds. Streamed from memory,
        every row costs a latency of its own besides its bytes: ggml hands the threads 16 rows at a time,
        and short rows break the stream into small pieces (a 640-wide matrix read at 60% of a 4096-wide
        one's rate here). Timed at two row widths, the same bytes: the difference is the rows'."""
        long = self.mat_vec("q8_0", BANDWIDTH_BYTES)
        short = self.mat_vec("q8_0", BANDWIDTH_BYTES, width=SHORT_ROW)
        if not long:
            return None
        if not short or short[2] <= long[2]:
            return long[0] / long[1], 0.0
        per_row = max(0.0, (short[1] / short[0] * long[0] - long[1]) / (short[2] * long[0] / short[0] - long[2]))
        streaming = max(long[1] - long[2] * per_row, long[1] / 2)
        return long[0] / streaming, per_row

    def prefill_rate(
        self,
        name: str,
        repeats: int = 3,
        width: int = ROW,
        tokens: int = PREFILL_TOKENS,
        nbytes: int = 0,
        repacked: bool = False,
    ) -> float | None:
        """Floating-point operations per second of a 128-token batch against a matrix of this type, rows
        of `width` weights (the same weights in all: a narrower matrix has more rows; `nbytes`: a matrix of
        about that size instead; `repacked`: in CPU_REPACK, None where it is not repacked here)."""
        g = self.ggml
        type_id = TYPE_IDS[name]
        if width % QK_K and name.endswith("_K"):
            return None  # a K-quant's row holds whole 256-weight blocks
        row = g.ggml_row_size(type_id, width)
        rows = max(16, nbytes // row // 16 * 16) if nbytes else PREFILL_ROWS * ROW // width
        ctx = self._context((0 if repacked else rows * row) + 3 * tokens * width * 4 + rows * tokens * 4, 4)
        try:
            with self._matrix(ctx, type_id, width, rows, repacked) as w:
                if w is None:
                    return None
                x = g.ggml_new_tensor_2d(ctx, TYPE_IDS["f32"], width, tokens)
                self._fill(x, TYPE_IDS["f32"], tokens, width)
                seconds = self._time_graph(ctx, g.ggml_mul_mat(ctx, w, x), repeats=repeats)
                return 2.0 * width * rows * tokens / seconds if seconds > 0 else None
        finally:
            g.ggml_free(ctx)

    def elementwise_seconds(self) -> dict[str, float]:
        """Seconds per element of the operations between the mat-muls, by kind: a rotary embedding, a
        norm, a GELU gate, and a plain one (an add: also the multiplies, other activations and copies).
        A prompt's batch runs them on every token's activations: a tiny model spends a tenth of its
        prompt there."""
        g = self.ggml
        f32, i32 = TYPE_IDS["f32"], 26
        width, heads, tokens = 128, 8, 256
        n = width * heads * tokens
        ctx = self._context(8 * n * 4 + tokens * 4, 8, 16)
        try:
            a = g.ggml_new_tensor_3d(ctx, f32, width, heads, tokens)
            b = g.ggml_new_tensor_3d(ctx, f32, width, heads, tokens)
            pos = g.ggml_new_tensor_1d(ctx, i32, tokens)
            self._fill(a, f32, heads * tokens, width)
            self._fill(b, f32, heads * tokens, width)
            ctypes.memmove(g.ggml_get_data(pos), (ctypes.c_int32 * tokens)(*range(tokens)), 4 * tokens)
            rope = g.ggml_rope_ext(ctx, a, pos, None, width, 2, 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)
            return {
                "rope": self._time_graph(ctx, rope, repeats=ROUND_REPEATS) / n,
                "norm": self._time_graph(ctx, g.ggml_rms_norm(ctx, a, 1e-6), repeats=ROUND_REPEATS) / n,
                "plain": self._time_graph(ctx, g.ggml_add(ctx, a, b), repeats=ROUND_REPEATS) / n,
                "gelu": self._time_graph(ctx, g.ggml_geglu_split(ctx, a, b), repeats=ROUND_REPEATS) / n,
            }
        finally:
            g.ggml_free(ctx)

    def attention_seconds(
        self, width: int, queries: int = 1, cells: int = ATTENTION_CELLS, masked: bool = False
    ) -> float | None:
        """Seconds per cell, query token and query head of flash attention over an f16 cache (ggml's
        kernel: a dot product, an online softmax step and a scaled add per cell): one token's as decode
        runs it, or a batch of `queries` tokens' as a prompt's prefill does (ggml may take another path);
        `masked`: with a mask that hides nothing (its reads are what is timed)."""
        g = self.ggml
        f32, f16 = TYPE_IDS["f32"], TYPE_IDS["f16"]
        heads, kv_heads = ATTENTION_HEADS, ATTENTION_KV_HEADS
        kv_bytes = 2 * width * cells * kv_heads * 2
        ctx = self._context(kv_bytes + 4 * width * heads * queries * 2 + 2 * cells * queries, 8)
        try:
            q = g.ggml_new_tensor_3d(ctx, f32, width, queries, heads)
            k = g.ggml_new_tensor_3d(ctx, f16, width, cells, kv_heads)
            v = g.ggml_new_tensor_3d(ctx, f16, width, cells, kv_heads)
            self._fill(q, f32, heads * queries, width)
            self._fill(k, f16, cells * kv_heads, width)
            self._fill(v, f16, cells * kv_heads, width)
            mask = None
            if masked:
                mask = g.ggml_new_tensor_2d(ctx, f16, cells, queries)
                ctypes.memset(g.ggml_get_data(mask), 0, 2 * cells * queries)
            out = g.ggml_flash_attn_ext(ctx, q, k, v, mask, 1.0 / width**0.5, 0.0, 0.0)
            seconds = self._time_graph(ctx, out, repeats=REPEATS if queries == 1 else ROUND_REPEATS)
            return seconds / (cells * heads * queries)
        finally:
            g.ggml_free(ctx)

    def streamed_attention(self) -> dict[str, dict[str, float]]:
        """Width -> KV heads a layer -> seconds a cell adds to each query head's attention when the cache
        comes from memory (STREAMED_WIDTHS x STREAMED_KV_HEADS; one buffer beyond the caches for all)."""
        g = self.ggml
        elements = BANDWIDTH_BYTES // 2
        ctx = self._context(BANDWIDTH_BYTES, 2)
        try:
            buffer = g.ggml_new_tensor_1d(ctx, TYPE_IDS["f16"], elements)
            self._fill(buffer, TYPE_IDS["f16"], elements // ROW, ROW)
            return {
                str(width): {str(kv): self._streamed_extra(buffer, width, kv) for kv in STREAMED_KV_HEADS}
                for width in STREAMED_WIDTHS
            }
        finally:
            g.ggml_free(ctx)

    def _streamed_extra(self, buffer: int, width: int, kv_heads: int) -> float:
        """What one cell costs one query head more over many layers' caches in `buffer` than over one
        layer's cache repeated (llama.cpp's layout: one KV head's rows `kv_heads` rows apart)."""
        g = self.ggml
        f32, f16 = TYPE_IDS["f32"], TYPE_IDS["f16"]
        row = width * 2  # bytes of one head's K (or V) in one cell
        half = STREAMED_CELLS * kv_heads * row  # one layer's K; its V as much again
        layers = max(1, min(STREAMED_LAYERS, BANDWIDTH_BYTES // (2 * half)))
        graph_size = 4 * layers + 16
        data = layers * 4 * width * STREAMED_HEADS + 2 * STREAMED_CELLS + (1 << 20)  # and the second graph
        ctx = self._context(data, 4 * layers + 4, 2 * graph_size)
        try:
            mask = g.ggml_new_tensor_2d(ctx, f16, STREAMED_CELLS, 1)
            ctypes.memset(g.ggml_get_data(mask), 0, 2 * STREAMED_CELLS)
            outs = []
            for layer in range(layers):
                q = g.ggml_new_tensor_3d(ctx, f32, width, 1, STREAMED_HEADS)
                self._fill(q, f32, STREAMED_HEADS, width)
                start = 2 * half * layer
                k = g.ggml_view_3d(ctx, buffer, width, STREAMED_CELLS, kv_heads, kv_heads * row, row, start)
                v = g.ggml_view_3d(ctx, buffer, width, STREAMED_CELLS, kv_heads, kv_heads * row, row, start + half)
                outs.append(g.ggml_flash_attn_ext(ctx, q, k, v, mask, 1.0 / width**0.5, 0.0, 0.0))
            streamed = self._time_graph(ctx, outs, graph_size, repeats=ROUND_REPEATS) / layers
            cached = self._time_graph(ctx, outs[0], graph_size)
            return max(0.0, streamed - cached) / (STREAMED_CELLS * STREAMED_HEADS)
        finally:
            g.ggml_free(ctx)

    def hidden_cell_seconds(
        self, width: int = 64, cells: int = ATTENTION_CELLS, queries: int = 1, shown: int = 1
    ) -> float | None:
        """Seconds per cell, query and head of flash attention over an f16 cache whose mask shows each
        query only the first `shown` cells: a lone token's (decode: the padded cells beyond a short chat
        are read, compared and skipped), or a prompt's batch of `queries` (ggml's tiled path skips a tile
        of cells no query of a tile can see, but converts its mask first: the future of a prompt's early
        tokens)."""
        g = self.ggml
        f32, f16 = TYPE_IDS["f32"], TYPE_IDS["f16"]
        heads, kv_heads = ATTENTION_HEADS, ATTENTION_KV_HEADS
        ctx = self._context(2 * width * cells * kv_heads * 2 + 2 * cells * queries + 4 * width * heads * queries * 2, 8)
        try:
            q = g.ggml_new_tensor_3d(ctx, f32, width, queries, heads)
            k = g.ggml_new_tensor_3d(ctx, f16, width, cells, kv_heads)
            v = g.ggml_new_tensor_3d(ctx, f16, width, cells, kv_heads)
            mask = g.ggml_new_tensor_2d(ctx, f16, cells, queries)
            self._fill(q, f32, heads * queries, width)
            self._fill(k, f16, cells * kv_heads, width)
            self._fill(v, f16, cells * kv_heads, width)
            hidden = (ctypes.c_uint16 * (cells * queries))(
                *(([0] * shown + [F16_MINUS_INFINITY] * (cells - shown)) * queries)
            )
            ctypes.memmove(g.ggml_get_data(mask), hidden, 2 * cells * queries)
            out = g.ggml_flash_attn_ext(ctx, q, k, v, mask, 1.0 / width**0.5, 0.0, 0.0)
            seconds = self._time_graph(ctx, out, repeats=REPEATS if queries == 1 else ROUND_REPEATS)
            return seconds / (cells * heads * queries)
        finally:
            g.ggml_free(ctx)


def _cpu_seconds() -> tuple[float, float] | None:
    """(every CPU's busy seconds, this process's and the one that started it): what other processes
    used is the difference. The app that asked for the probe is not counted as another: its own
    bursts (a list being planned) are short, and the rates' spread shows them where they mattered."""
    try:
        import psutil

        times = psutil.cpu_times()
        me = psutil.Process()
        own = [me.cpu_times()]
        parent = me.parent()
        if parent is not None:
            own.append(parent.cpu_times())
    except Exception:  # psutil missing or refused: the load is unknown
        return None
    idle = times.idle + getattr(times, "iowait", 0.0)
    return sum(times) - idle, sum(t.user + t.system for t in own)


def _repacked_rates(probe: _Probe) -> dict[str, dict[str, float]]:
    """The rates of the weight types ggml-cpu repacks on this CPU, timed repacked (where llama.cpp keeps host
    weights in CPU_REPACK: vramchat's default but on AMX CPUs, planner.weights.uses_cpu_extra_buffers).
    Repacking moves them far (2 EPYC cores: a q4_0 mat-vec 32 GB/s plain, 53 repacked; a 32-token q4_0
    mat-mul 242 GFLOP/s plain, 566 repacked; a q4_K one 634 and 479)."""
    from app.devices.ggml import cpu_features
    from planner.weights import uses_cpu_extra_buffers

    if probe.repack is None or not uses_cpu_extra_buffers(None, cpu_features()):
        return {}
    repacks = [name for name in DECODE_TYPES if probe.decode_rate(name, DECODE_BYTES, 1, repacked=True)]
    decode = _best_in_rounds(
        tuple(repacks), lambda name: probe.decode_rate(name, DECODE_BYTES, ROUND_REPEATS, repacked=True), ROUNDS
    )
    prefill = {name: probe.prefill_rate(name, ROUND_REPEATS, repacked=True) for name in repacks}
    short = {name: probe.prefill_rate(name, ROUND_REPEATS, 1024, SHORT_BATCH, repacked=True) for name in repacks}
    return {
        "decode_rates_repacked": decode,
        "prefill_rates_repacked": {name: rate for name, rate in prefill.items() if rate},
        "prefill_rates_short_repacked": {name: rate for name, rate in short.items() if rate},
    }


def _widths_rates(probe: _Probe, width: int) -> dict[str, float]:
    return _best_in_rounds(PREFILL_TYPES, lambda name: probe.prefill_rate(name, ROUND_REPEATS, width), ROUNDS)


def _best_in_rounds(names: tuple[str, ...], timing: Callable[[str], float | None], rounds: int) -> dict[str, float]:
    """Each name's highest rate over `rounds` rounds, every name timed once a round."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name in names:
            rate = timing(name)
            if rate:
                best[name] = max(best.get(name, 0.0), rate)
    return best


class _StreamRounds:
    """The q8_0 mat-vec over a matrix no cache holds (`beyond_cache`), timed in rounds spread over the probe
    and the median round kept. The rate memory streams at here is broad rather than now and then slowed:
    25 timings over 12 s read 0.56 to 0.88 of the in-cache rate (median 0.74), and one probe's single timing
    (0.45) had the wide models' decode 20% slow. A token's weights meet the typical rate, not the best."""

    def __init__(self, probe: _Probe) -> None:
        self.probe = probe
        self.timed: list[tuple[float, float]] = []

    def round(self) -> None:
        timed = self.probe.beyond_cache()
        if timed:
            self.timed.append(timed)

    def median(self) -> tuple[float, float] | None:
        """(bytes/s, seconds a row) of the round whose streaming rate is the median, None if none timed."""
        if not self.timed:
            return None
        return sorted(self.timed)[(len(self.timed) - 1) // 2]


class _AttentionRounds:
    """Attention at every head width, a token's and a prompt's, timed in rounds spread over the probe and
    kept at each one's fastest. A neighbour on a VM's host slows this kernel by half for 0.1 s to seconds
    while nothing here runs (2 EPYC cores: a 32-wide cell 20 ns, 29-31 in such a spell); the mat-vec
    rates are kept at the best of rounds the same way. The mask is always there: the engine's graph
    always hands flash attention one (a load and an add per cell; measured here: a 32-wide head's prompt
    cell 1.15 ns without, 1.53 with, 1.34 in a zoo model's own prompt)."""

    def __init__(self, probe: _Probe) -> None:
        self.probe = probe
        self.seconds: dict[tuple[int, int], float] = {}

    def round(self) -> None:
        for width in ATTENTION_WIDTHS:
            for queries, cells in ((1, ATTENTION_CELLS), (PREFILL_TOKENS, PREFILL_ATTENTION_CELLS)):
                self._keep((queries, width), self.probe.attention_seconds(width, queries, cells, masked=True))
        shown = self.probe.hidden_cell_seconds(HIDDEN_WIDTH, PREFILL_ATTENTION_CELLS, PREFILL_TOKENS, FA_TILE_CELLS)
        self._keep((PREFILL_TOKENS, -1), shown)

    def _keep(self, key: tuple[int, int], seconds: float | None) -> None:
        if seconds:
            self.seconds[key] = min(self.seconds.get(key, seconds), seconds)

    def fastest(self, queries: int) -> dict[str, float]:
        """Head width -> the fastest seconds a cell and query head took, for a batch of `queries` tokens."""
        return {
            str(width): seconds
            for (batch, width), seconds in sorted(self.seconds.items())
            if batch == queries and width > 0
        }

    def prefill_hidden_cell(self) -> float:
        """Seconds a cell the mask hides from a whole tile of a prompt's queries costs one query and head:
        its mask's conversion, from a batch whose mask shows each query the first tile only (the shown
        tile computed at the visible cell's cost; 2 EPYC cores: 0.2 ns, a visible 32-wide cell 1.25)."""
        timed = self.seconds.get((PREFILL_TOKENS, -1))
        visible = self.seconds.get((PREFILL_TOKENS, HIDDEN_WIDTH))
        if not timed or not visible:
            return 0.0
        cells = PREFILL_ATTENTION_CELLS
        return max(0.0, (timed * cells - FA_TILE_CELLS * visible) / (cells - FA_TILE_CELLS))


class OthersLoad:
    """The share of the CPUs other processes used since it was made (None where psutil cannot say)."""

    def __init__(self) -> None:
        self.t0, self.before = time.perf_counter(), _cpu_seconds()

    def share(self) -> float | None:
        after = _cpu_seconds()
        elapsed = time.perf_counter() - self.t0
        if not self.before or not after or elapsed <= 0:
            return None
        others = (after[0] - self.before[0]) - (after[1] - self.before[1])
        return max(0.0, others / elapsed / (os.cpu_count() or 1))


def measure(threads: int | None = None, stop_when_busy: bool = True) -> dict[str, Any]:
    """Every figure of this CPU the speed model uses, with the seconds the probe took and the share of
    the CPUs other processes used meanwhile (`load`, None where unknown). `stop_when_busy`: once the
    per-type mat-vecs are timed under more load than app/speed/trust.py accepts, the rest is not
    timed (the probe would not be kept; on a busy machine it takes ten times as long)."""
    from app.speed.trust import BUSY_LOAD

    load = OthersLoad()
    threads = threads or max(1, os.cpu_count() or 1)
    probe = _Probe(threads)
    start = probe.graph_start()
    per_op, small = float("inf"), (float("inf"), 0)
    for _ in range(ROUNDS):  # side by side: the two differ by what a mat-mul adds
        per_op = min(per_op, probe.per_op())
        small = min(small, probe.small_mat_vecs())
    decode = _best_in_rounds(DECODE_TYPES, lambda name: probe.decode_rate(name, DECODE_BYTES, ROUND_REPEATS), ROUNDS)
    so_far = load.share()
    if stop_when_busy and so_far is not None and so_far > BUSY_LOAD:
        return {"threads": threads, "decode_rates": decode, "load": so_far, "stopped": "busy", "probe_seconds": 0.0}
    attention, stream = _AttentionRounds(probe), _StreamRounds(probe)
    attention.round()
    stream.round()
    prefill = _best_in_rounds(PREFILL_TYPES, lambda name: probe.prefill_rate(name, ROUND_REPEATS), ROUNDS)
    prefill_by_width = {str(width): _widths_rates(probe, width) for width in PREFILL_WIDTHS}
    attention.round()
    stream.round()
    short_batch = _best_in_rounds(
        PREFILL_TYPES, lambda name: probe.prefill_rate(name, ROUND_REPEATS, 1024, SHORT_BATCH), ROUNDS
    )
    repacked = _repacked_rates(probe)
    short_beyond = {
        name: probe.prefill_rate(name, 1, 1024, SHORT_BATCH, SHORT_BATCH_BEYOND_BYTES) for name in PREFILL_TYPES
    }
    # beyond the cache: the same q8_0 mat-vec on a matrix no cache holds, and a plain f32 read
    stream.round()
    large = stream.median()
    bandwidth = probe.decode_rate("f32", BANDWIDTH_BYTES)
    attention.round()
    hidden = probe.hidden_cell_seconds()
    streamed_attention = probe.streamed_attention()
    # a prompt's mask over a long chat's cells leaves the core's cache: each query head reads it again
    short = probe.attention_seconds(64, PREFILL_TOKENS, PREFILL_ATTENTION_CELLS, masked=True)
    long = probe.attention_seconds(64, PREFILL_TOKENS, MASK_CELLS, masked=True)
    mask_seconds = max(0.0, long - short) if long and short else 0.0
    elementwise = probe.elementwise_seconds()
    try:
        sampler = sampler_entry_seconds()
    except (AttributeError, OSError):  # a llama-cpp-python without the sampler API: the table's figure (0 here)
        sampler = 0.0
    factor = min(1.0, large[0] / decode["q8_0"]) if large and decode.get("q8_0") else 1.0
    q8_0 = decode.get("q8_0")
    mat_mul = max(0.0, small[0] - per_op - small[1] / q8_0) if q8_0 else 0.0
    return {
        "threads": threads,
        "graph_seconds": start,
        "op_seconds": per_op,
        "mat_mul_seconds": mat_mul,
        "decode_rates": decode,
        "prefill_rates": prefill,
        "prefill_rates_by_width": prefill_by_width,
        "prefill_rates_short_batch": short_batch,
        "prefill_rates_short_beyond": {name: rate for name, rate in short_beyond.items() if rate},
        **repacked,
        "large_factor": factor,
        "row_seconds": large[1] if large else 0.0,
        "hidden_cell_seconds": hidden,
        "prefill_hidden_cell_seconds": attention.prefill_hidden_cell(),
        "mask_seconds": mask_seconds,
        "elementwise_seconds": elementwise,
        "sampler_entry_seconds": sampler,
        "read_bandwidth": bandwidth,
        "attention_seconds": attention.fastest(1),
        "prefill_attention_seconds": attention.fastest(PREFILL_TOKENS),
        "attention_streamed_extra": streamed_attention,
        "load": load.share(),
        "rounds": ROUNDS,
        "probe_seconds": time.perf_counter() - load.t0,
    }


def _main() -> None:
    """`python -m app.speed.probe [--full] [--threads N]`: the figures as one JSON line (N: the engine's
    threads unless given; the tests ask for a large CPU's count on a small one)."""
    import json
    import sys

    args = sys.argv[1:]
    threads = int(args[args.index("--threads") + 1]) if "--threads" in args else None
    print(json.dumps(measure(threads, stop_when_busy="--full" not in args)))


if __name__ == "__main__":
    _main()
