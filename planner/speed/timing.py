"""The timing rules: the seconds a plan's token (decode) or prompt (prefill) takes, from its cost
(planner.speed.cost) and this machine's figures (planner.speed.machine).

1. **Time per device, a token** (`decode_seconds`). A GPU streams bytes at its memory bandwidth times an
   efficiency (`GPU_EFFICIENCY`, a table figure: 60%, with `GPU_OP_SECONDS` a kernel, fitted to two
   decodes recorded on an H100: the demo, where the kernels' count dominates, and an
   8B-shaped Q4_0, where the bytes do); a bandwidth timed on the device is taken as its kernels reach it.
   A CPU reads each weight type at the rate its probe timed, slowed beyond the cache
   (planner.speed.machine), plus its rows' latency, the operations between the mat-muls and attention:
   per cell and query head at the width's timed cost, the cells the mask hides skipped, a decode's view of
   SPLIT_KV_CELLS or more of an f16 cache split between the threads (`attention_seconds`), and what the
   cache adds when it comes from memory (`streamed_attention_seconds`).
2. **Fixed cost per token.** Each graph pays its start (`graph_seconds`, waking the threads)
   and one synchronisation per operation (`op_seconds` x the graph's operations on the CPU,
   both timed by the probe; `GPU_OP_SECONDS` a kernel on a GPU); each split between devices
   passes the hidden state (n_embd floats, microseconds over PCIe) at `SPLIT_SECONDS` of
   latency; the sampler chain costs n_vocab x what the probe timed the engine's own chain at
   per entry (`sampler_entry_seconds`, on one core: 3.7 ns on a 2-core EPYC; the table's
   `SAMPLER_SECONDS_PER_ENTRY` where no probe timed it); the engine process's own loop
   (Python, the socket to the app, the piece's text) `ENGINE_TOKEN_SECONDS`. The GPU, split
   and engine figures are table figures, timed once on the machines vramchat is developed on
   (2-core Xeon and EPYC), not on the user's.
3. **Prefill** of a prompt of N tokens (`prefill_seconds`): the FLOPs of its matmuls, 2 x active
   parameters x N, at the CPU's timed mat-mul rate per weight type (a 128-token batch; a shorter batch
   between a token's mat-vec and the SHORT_BATCH rate: `batch_mat_mul_seconds`); plus attention, the
   cells each token sees x its query heads x the time the probe measured per cell, query
   token and head of flash attention on a 128-token batch (ggml's tiled prompt path, per head
   width; without it, 4 x width FLOPs a cell at the f16 mat-mul rate), every query against the
   whole padded view of the cache, less the tiles a causal mask lets ggml skip (`TiledBatch`);
   a batch under 64 tokens runs query by query as decode does; plus, per batch, the output
   matrix once (only the batch's last token's logits are computed), its graph and llama_decode's own
   work on the calling thread (`host_batch_seconds`). A GPU's arithmetic rate is not known to vramchat,
   so a plan with GPU layers, or whose prompt a GPU takes by op offload, has no prefill figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from planner.speed.basis import MEASURED, PENDING, TABLE, UNKNOWN
from planner.speed.cost import DeviceCost, TokenCost
from planner.speed.machine import (
    SAMPLER_SECONDS_PER_ENTRY,
    SHORT_BATCH,
    CpuSpeed,
    GpuSpeed,
    beyond_share,
    split_repacked,
)

# -- constants (table figures: not timed on the user's machine) ---------------------------------
# fitted to the lent H100's 2,000-token decodes (tests/data/cuda_h100.json.gz: the demo, 246 MB a token,
# 1.09 ms; an 8B-shaped Q4_0, 4.1 GB a token, 3.16 ms; CUDA graphs on): two unknowns, two runs
GPU_EFFICIENCY = 0.60  # share of the spec sheet's bandwidth llama.cpp's decode kernels reach
GPU_OP_SECONDS = 1.5e-6  # one kernel of a CUDA graph, per operation
GPU_GRAPH_SECONDS = 150e-6  # a GPU graph's start: inputs uploaded, the result copied back
SPLIT_SECONDS = {"cuda": 25e-6, "rocm": 30e-6, "vulkan": 40e-6, "metal": 10e-6, "rpc": 400e-6}
# vramchat's engine loop: a ctypes decode call, the piece, the socket to the app, whose process reads it on
# the same cores as llama.cpp's threads (2-core EPYC, tiny models' 256-token replies: 20-23 us in one
# process, about 65 across the two)
ENGINE_TOKEN_SECONDS = 65e-6
# a batch this long or longer of ops whose weights stay in host memory runs on a GPU that offloads ops
# (ggml-cuda, ggml-vulkan, ggml-metal: op_offload_min_batch_size, GGML_OP_OFFLOAD_MIN_BATCH; ggml-rpc has no
# offload_op, as planner.compute's compute buffers know)
OP_OFFLOAD_MIN_BATCH = 32
MASK_SHORT_VIEW = 512  # a prompt's mask over this view costs nothing more (8x it: the probe's MASK_CELLS)
# a prompt after the user's pause wakes llama.cpp's threads and finds its caches cold: 0.3-0.9 ms more than
# the same prompt right after another on the 2-core EPYC (tiny models, an idle second between). On that VM a
# process may also wait ~11.7 ms for its second core after 0.1 s idle, or never, by process (the demo's engine
# never did, a tiny model's nearly always): not priced, as the probe's own process would time it for every model
PROMPT_START_SECONDS = 0.5e-3
# llama_decode's own work on the calling thread before a batch's graph runs, none of it in the probe's graphs:
# building and allocating the graph for the batch's shape (per operation), and each token's bookkeeping in
# the batch and in each KV cache (its cells, positions and mask row). Timed on the 2-core EPYC, to the
# scheduler's first look at a node: 0.29 ms before a 32-token batch of an 82-operation zoo model, 0.59 before
# the demo's (511 operations); 0.83 and 1.69 ms before 512 tokens (the demo keeps two caches, full and
# sliding-window). Left out, a tiny model's 1,024-token prompt read 4-8% faster than llama.cpp runs it
HOST_BATCH_SECONDS = 0.23e-3
HOST_OP_SECONDS = 0.7e-6
HOST_TOKEN_SECONDS = 1.1e-6  # per token and KV cache
SPLIT_KV_CELLS = 512  # from this view on ggml-cpu splits one query's attention by cells between the threads
FA_TILE_QUERIES = 64  # ggml-cpu's GGML_FA_TILE_Q (ggml-cpu/common.h): a batch this long runs attention tiled
FA_TILE_CELLS = 64  # ggml-cpu's GGML_FA_TILE_KV: the cells of a tile its tiled path computes or skips at once


@dataclass(frozen=True)
class Duration:
    """What a token or a prompt takes: its seconds, their basis, each device's share and the notes."""

    seconds: float | None  # None: a device with no figure
    basis: str
    per_device: list[tuple[DeviceCost, float | None, str, str]]  # (device, seconds, basis, source)
    notes: tuple[str, ...] = ()


def decode_seconds(cost: TokenCost, fill: int, cpu: CpuSpeed | None, gpus: dict[str, GpuSpeed]) -> Duration:
    """Seconds one token takes at a fill of `fill` tokens, with its basis and each device's share."""
    cells, cells_swa = cost.cells_at(fill)
    total, basis = 0.0, MEASURED
    parts: list[tuple[DeviceCost, float | None, str, str]] = []
    notes: list[str] = []
    missing = False
    for d in cost.devices:
        kv = d.kv_bytes(cells, cells_swa)
        streamed = d.weight_bytes() + kv + d.state_bytes
        if d.is_host:
            if cpu is None:
                parts.append((d, None, UNKNOWN, "this CPU's speed was not measured"))
                missing = True
                continue
            seconds = cpu.graph_seconds + d.ops * cpu.op_seconds + d.mat_muls * cpu.mat_mul_seconds
            seconds += cpu.rows_seconds(d.rows, streamed)
            seconds += cpu.elementwise(d.elements)
            for type_name, nbytes in d.weights.items():
                rate, used = cpu.decode_rate(type_name, streamed)
                seconds += nbytes / rate
                plain, repacked = split_repacked(type_name)
                if repacked and plain not in cpu.decode_rates_repacked:
                    notes.append(f"{plain} weights run repacked, timed plain (the probe did not time them repacked)")
                if used:
                    notes.append(f"{plain} weights timed as {used} (the probe cannot make {plain})")
            # attention: per cell and query head, timed in cache; slowed as the weights once it spills. The
            # cells the mask hides in the padded view are skipped before their K is read
            # (ggml-cpu/ops.cpp: ggml_compute_forward_flash_attn_ext_f16_one_chunk, `mv == -INFINITY`)
            attention = attention_seconds(cost, d, cpu, fill, cpu.attention_cell, split_threads=cpu.threads)
            from_memory = streamed_attention_seconds(cost, d, cpu, fill)
            if from_memory is None:  # figures of a probe that did not time it: slowed as the weights
                seconds += attention / cpu.cache_factor(streamed)
            else:  # the cache leaves the CPU's caches as the weights and the other layers' caches pass
                seconds += attention + beyond_share(streamed) * from_memory
            if d.state_bytes:
                seconds += d.state_bytes / cpu.decode_rate("f32", streamed)[0]
            parts.append((d, seconds, MEASURED, cpu.source))
            total += seconds
        else:
            gpu = gpus.get(d.name)
            if gpu is None or not gpu.bandwidth:
                why = (gpu.source if gpu and gpu.source else "") or "its memory bandwidth is not known"
                parts.append((d, None, PENDING if gpu and gpu.pending else UNKNOWN, why))
                missing = True
                continue
            # a rate timed on the device is what its kernels reach: no spec-sheet efficiency on top; where each
            # weight type was timed there, its own rate (a quantized type's shader dequantizes as it reads)
            efficiency = 1.0 if gpu.measured else GPU_EFFICIENCY
            start = GPU_GRAPH_SECONDS if gpu.graph_seconds is None else gpu.graph_seconds
            seconds = start + d.ops * (GPU_OP_SECONDS if gpu.op_seconds is None else gpu.op_seconds)
            by_type = gpu.weights_seconds(d.weights)
            if by_type is None:
                seconds += streamed / (gpu.bandwidth * efficiency)
            else:
                seconds += by_type + (kv + d.state_bytes) / gpu.bandwidth
            parts.append((d, seconds, MEASURED if gpu.measured else TABLE, gpu.source))
            if not gpu.measured:
                basis = TABLE
            total += seconds
    total += sum(SPLIT_SECONDS.get(b, SPLIT_SECONDS["cuda"]) for b in cost.splits)
    total += ENGINE_TOKEN_SECONDS
    total += cpu.sampler_seconds(cost.n_vocab) if cpu else cost.n_vocab * SAMPLER_SECONDS_PER_ENTRY
    if missing:
        return Duration(None, UNKNOWN, parts, tuple(dict.fromkeys(notes)))
    return Duration(total, basis, parts, tuple(dict.fromkeys(notes)))


def attention_seconds(
    cost: TokenCost, d: DeviceCost, cpu: CpuSpeed, seen: float, cell: Callable[[int], float], split_threads: int = 1
) -> float:
    """One query's attention on the CPU when the query sees `seen` tokens: the cells it attends to at
    `cell(width)` each, the rest of the padded view at the cost of a hidden cell, per query head.

    `split_threads`: a lone token's query (decode) over a view of SPLIT_KV_CELLS or more of an f16 or f32
    cache is split by cells, each thread a slice of the view (ggml-cpu/ops.cpp: `use_split_kv_path`). The
    cells in use are the view's first, so the first thread's slice holds the most of them and the others
    wait for it: the attention lasts as if every thread's slice were as full as the first's."""
    full, view_full, swa, view_swa = _cells_read(cost, d, seen, split_threads)
    total = 0.0
    for book, visible, view in ((d.attn_heads, full, view_full), (d.attn_heads_swa, swa, view_swa)):
        for width, heads in book.items():
            total += heads * (visible * cell(int(width)) + max(view - visible, 0) * cpu.hidden_cell_seconds)
    return total


def _cells_read(cost: TokenCost, d: DeviceCost, seen: float, split_threads: int) -> tuple[float, int, float, int]:
    """The cells a query at `seen` tokens reads and the views they lie in, as if every thread's slice
    were as full as the busiest one's (attention_seconds): (full, view, sliding-window, its view)."""
    full, swa = cost.visible_at(seen)
    view_full, view_swa = cost.cells_at(math.ceil(seen))
    split = split_threads > 1 and len(d.kv_cell) == 1 and set(d.kv_cell) <= {"f16", "f32"}
    if split and view_full >= SPLIT_KV_CELLS:
        # `cell` was timed with every cell of the view in use: the threads' slices equally full
        chunk = -(-view_full // split_threads)
        first = min(full, chunk)
        full, view_full = first * split_threads, chunk * split_threads
    return full, view_full, swa, view_swa


def streamed_attention_seconds(cost: TokenCost, d: DeviceCost, cpu: CpuSpeed, seen: float) -> float | None:
    """What one token's attention adds when every layer's KV cache comes from memory rather than the CPU's
    caches: each cell read, per layer of each shape, at the probe's figure for that width and KV head
    count (how far apart one head's rows lie decides how well the CPU prefetches them). None: the probe
    did not time it."""
    if not cpu.attention_streamed_extra:
        return None
    full, _, swa, _ = _cells_read(cost, d, seen, cpu.threads)
    total = 0.0
    for layouts, cells in ((d.attn_layouts, full), (d.attn_layouts_swa, swa)):
        for shape, layers in layouts.items():
            width, kv_heads = (int(x) for x in shape.split("/"))
            total += layers * cells * (cpu.streamed_layer_cell(width, kv_heads) or 0.0)
    return total


def prefill_seconds(cost: TokenCost, n_tokens: int, start: int, cpu: CpuSpeed | None) -> Duration:
    """Seconds a prompt of `n_tokens` takes after `start` tokens already in the cache (CPU plans only)."""
    if any(not d.is_host for d in cost.devices):
        return Duration(None, UNKNOWN, [], ("a GPU's arithmetic rate is not known to vramchat",))
    if cost.prompt_offload and min(n_tokens, cost.n_ubatch) >= OP_OFFLOAD_MIN_BATCH:
        # ggml_backend_sched hands an op whose weights are in host memory to a GPU that wants it: CUDA, Vulkan
        # and Metal take a batch of 32 tokens or more (ggml-backend.cpp, `1.off`). A lent H200 read the demo's
        # 512-token prompt at 8,782 tok/s with no layer on the GPU, where the CPU's price was 1,178
        gpus = ", ".join(cost.prompt_offload)
        why = f"llama.cpp reads a prompt's batches on {gpus} (op offload), whose arithmetic rate vramchat does not know"
        return Duration(None, UNKNOWN, [], (why,))
    if cpu is None:
        return Duration(None, UNKNOWN, [], ("this CPU's speed was not measured",))
    d = cost.devices[0]
    seconds = PROMPT_START_SECONDS + n_tokens * cpu.elementwise(d.elements)  # the activations between mat-muls
    step = max(cost.n_ubatch, 1)
    for type_name in d.params:
        for first in range(0, n_tokens, step):
            seconds += batch_mat_mul_seconds(d, cpu, type_name, min(step, n_tokens - first))
    # attention, batch by batch (the engine decodes a prompt in batches of n_ubatch). ggml runs a batch of
    # FA_TILE_QUERIES tokens or more tiled (prefill_attention_seconds); a shorter batch query by query as
    # decode does, where a hidden cell is skipped (ggml-cpu/ops.cpp: ggml_compute_forward_flash_attn_ext_f16,
    # `use_tiled`). The view is the cells in use padded to KV_PAD; a sliding-window cache holds at most its own.
    batches = -(-n_tokens // step)
    for first in range(0, n_tokens, step):
        size = min(step, n_tokens - first)
        if size < FA_TILE_QUERIES:
            seconds += size * attention_seconds(cost, d, cpu, start + first + (size + 1) / 2, cpu.attention_cell)
        else:
            full, swa = cost.cells_at(start + first + size)
            books = ((d.attn_heads, d.attn_layouts, full, 0), (d.attn_heads_swa, d.attn_layouts_swa, swa, cost.n_swa))
            hidden = cpu.prefill_hidden_cell_seconds
            for book, layouts, view, window in books:
                # the batch's mask (a row of the view per query) stays in the core's cache over a short
                # view; over a long one each query head reads it again (none at 512 cells, all at 4,096)
                spill = min(1.0, max(0.0, math.log(max(view, 1) / MASK_SHORT_VIEW) / math.log(8)))
                cells = TiledBatch(view, start + first, size, window)
                for w, h in book.items():
                    layers = sum(n for shape, n in layouts.items() if shape.split("/")[0] == w) or 1
                    costs = (max(cpu.prefill_attention_cell(int(w)) - hidden, 0.0), hidden + spill * cpu.mask_seconds)
                    seconds += layers * cells.seconds(max(round(h / layers), 1), cpu.threads, *costs)
    # each batch computes the logits of its last token only: the output matrix once a batch, and its graph
    if d.output_bytes:
        out = d.output_bytes / cpu.decode_rate(d.output_type, d.weight_bytes())[0]
        seconds += batches * (out + cpu.rows_seconds(d.output_rows, d.weight_bytes()))
    seconds += batches * (cpu.graph_seconds + d.ops * cpu.op_seconds + d.mat_muls * cpu.mat_mul_seconds)
    seconds += host_batch_seconds(d, n_tokens, batches)
    return Duration(seconds, MEASURED, [], ())


def host_batch_seconds(d: DeviceCost, n_tokens: int, batches: int) -> float:
    """What llama_decode does on the calling thread for a prompt's `batches` batches (`n_tokens` in all)
    before each graph runs: the graph built for the batch's shape, and each token's bookkeeping in each KV
    cache (an iSWA model such as Gemma 3 keeps two)."""
    caches = max(1, bool(d.kv_cell) + bool(d.kv_cell_swa))
    return batches * (HOST_BATCH_SECONDS + d.ops * HOST_OP_SECONDS) + n_tokens * caches * HOST_TOKEN_SECONDS


@dataclass(frozen=True)
class TiledBatch:
    """A prompt's batch of `size` queries at positions `start`... over a view of `view` cells (`window`: a
    sliding-window layer's), as ggml-cpu's tiled flash attention (a batch of FA_TILE_QUERIES or more) runs
    it: the queries FA_TILE_QUERIES at a time, the cells FA_TILE_CELLS at a time; every tile's mask is
    converted, and a tile of cells none of a tile's queries can see is skipped: the future of a prompt's
    early tokens (ggml-cpu/ops.cpp: ggml_compute_forward_flash_attn_ext_tiled, `can_skip`). A 512-token
    prompt from the start computes 36 of its 64 tiles; 2 EPYC cores, 32 wide: 1.70 ms measured, 2.61 with
    every cell shown, 1.67 so planned."""

    view: int
    start: int
    size: int
    window: int = 0

    def tile(self, query: int, rows: int) -> tuple[int, int]:
        """(cells computed, mask cells converted) for `rows` queries from the batch's `query`-th."""
        tiles = -(-self.view // FA_TILE_CELLS)
        seen = self.start + query + rows  # the cells the tile's last query sees, its own included
        if self.window:
            seen = min(seen, self.window + rows)
        return FA_TILE_QUERIES * FA_TILE_CELLS * min(tiles, -(-seen // FA_TILE_CELLS)), rows * FA_TILE_CELLS * tiles

    def cells(self) -> tuple[int, int]:
        """(cells computed, mask cells converted) per query head over the whole batch."""
        computed = masked = 0
        for query in range(0, self.size, FA_TILE_QUERIES):
            c, m = self.tile(query, min(FA_TILE_QUERIES, self.size - query))
            computed, masked = computed + c, masked + m
        return computed, masked

    def seconds(self, heads: int, threads: int, computed_cell: float, masked_cell: float) -> float:
        """Seconds one layer's `heads` query heads take, at a computed and a masked cell's cost (each timed
        with `threads` threads sharing the work evenly). The rows (a query of a head) go out in chunks,
        four a thread, each thread taking the next when done (ggml_threadpool_chunk_add); a tile stops at
        a chunk's end and a head's, and a part tile computes as much as a whole one. A head's later
        queries see more tiles, so the last chunks weigh most and the threads end apart: the busiest
        thread's work is the time (2 threads, 512 queries over 1,024 cells: 13% over an even share)."""
        rows = self.size * heads
        n_chunks = threads * 4
        chunk = -(-rows // n_chunks)
        n_chunks = -(-rows // chunk)
        if threads == 1 or n_chunks < threads:
            n_chunks = threads
            chunk = -(-rows // n_chunks)
        busy = [0.0] * threads
        for first in range(0, n_chunks * chunk, chunk):
            row, end, work = first, min(first + chunk, rows), 0.0
            while row < end:
                query = row % self.size
                n = min(FA_TILE_QUERIES, end - row, self.size - query)
                computed, masked = self.tile(query, n)
                work += computed * computed_cell + masked * masked_cell
                row += n
            busy[busy.index(min(busy))] += work
        return max(busy) * threads


def batch_mat_mul_seconds(d: DeviceCost, cpu: CpuSpeed, type_name: str, size: int) -> float:
    """Seconds a batch of `size` tokens spends in one weight type's mat-muls (the output matrix aside). Under
    SHORT_BATCH tokens, between reading the weights once as a token's mat-vec does and the short batch's
    cost: no batch reads its weights faster than a token, and the rate timed at SHORT_BATCH alone made one
    token's nearly free (the demo's prompts in llama.cpp / planned so / planned at that rate alone, ms:
    1 token 11.2 / 10.2 / 8.0, 8 tokens 15.9 / 15.7 / 14.0, 16 tokens 23.6 / 23.1 / 22.0)."""
    params = d.params[type_name]
    width = 2 ** (d.params_log_width[type_name] / params) if d.params_log_width.get(type_name) else 0.0
    working_set = d.weight_bytes()

    def mat_mul(tokens: int) -> float:
        return 2.0 * params * tokens / cpu.prefill_rate(type_name, width, tokens, working_set)[0]

    if size >= SHORT_BATCH:
        return mat_mul(size)
    read = d.weights.get(type_name, 0) - (d.output_bytes if type_name == d.output_type else 0)
    once = max(read, 0) / cpu.decode_rate(type_name, working_set)[0]
    short = mat_mul(SHORT_BATCH)
    return once + (size - 1) / (SHORT_BATCH - 1) * max(short - once, 0.0)
