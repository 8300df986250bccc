"""How fast a plan will run: decode and prefill tokens per second, before the load.

The derivation, for one decoded token (llama.cpp runs the whole graph once per token):

1. **Bytes read, per device.** Every weight matrix of the layers a device holds is read once:
   its bytes as stored (a q4_K matrix reads 4.5 bits a weight). `token_embd` is looked up,
   not multiplied: one row a token. The output matrix (or, when tied, `token_embd` again as a
   matrix) is read whole on the device of the output layer. A mixture-of-experts layer reads
   only the experts the router picks: each `*_exps` tensor counts expert_used_count /
   expert_count of its bytes; shared experts (`*_shexp`) and dense parts count whole.
   The KV cache is read up to the filled cells: at a fill of n tokens each attention layer
   reads n cells (padded to llama.cpp's 256) of K and V, a sliding-window layer at most its
   window's cells; recurrent layers read and write their state.
2. **Time per device.** A GPU streams bytes at its memory bandwidth times an efficiency
   (`GPU_EFFICIENCY`, a table figure: 60%, with `GPU_OP_SECONDS` a kernel, fitted to two
   decodes recorded on an H100: the demo, where the kernels' count dominates, and an
   8B-shaped Q4_0, where the bytes do). A CPU on a few cores is bound by the
   dequantising arithmetic as much as by memory, so its rate is timed per weight type
   (app/speed/probe.py: ggml's own mat-vec with the engine's threads): `rate(type)`
   bytes/s for a matrix that stays in cache, times one slowdown factor `large_factor`
   measured on a matrix that cannot (q8_0, 192 MiB), for the part of the token's working
   set that is beyond the cache. Between 8 MiB (in cache) and 192 MiB (beyond) the factor
   is interpolated geometrically in the working set. On this machine the same factor held
   for six types within 10% (a q5_0 matrix slows as much as a q8_0 one). Beyond the cache each
   matrix row also costs a latency of its own (`row_seconds`, timed on q8_0 rows 512 and 4096
   wide): ggml hands the threads 16 rows at a time, and short rows cut the stream into small
   pieces (the demo's 640-wide output matrix streams at 60% of a 4096-wide one's rate). The CPU's
   attention costs per cached cell and query head (a dot product, an online-softmax step
   and a scaled add in ggml's flash-attention kernel), timed per head width (32 to 256: ggml
   runs a head in SIMD steps of 32 or 64 and the rest one by one, 20 ns a cell-head at 32
   against 6 at 64 on an AVX-512 CPU), and is slowed by the same factor once the working set
   spills out of the cache.
3. **Fixed cost per token.** Each graph pays its start (`graph_seconds`, waking the threads)
   and one synchronisation per operation (`op_seconds` x the graph's operations on the CPU,
   both timed by the probe; `GPU_OP_SECONDS` a kernel on a GPU); each split between devices
   passes the hidden state (n_embd floats, microseconds over PCIe) at `SPLIT_SECONDS` of
   latency; the sampler chain costs n_vocab x what the probe timed the engine's own chain at
   per entry (`sampler_entry_seconds`, on one core: 3.7 ns on a 2-core EPYC; the table's
   `SAMPLER_SECONDS_PER_ENTRY` where no probe timed it); the engine process's own loop
   (Python, the socket to the app, the piece's text) `ENGINE_TOKEN_SECONDS`. The GPU, split
   and engine figures are table figures, timed once on the machines vramchat is developed on
   (2-core Xeon and EPYC), not on the user's.
4. **Decode speed** = 1 / (the sum of the devices' times + the fixed costs), at the start
   of a chat (fill 0) and at a full context (fill n_ctx).
5. **Prefill** of a prompt of N tokens: the FLOPs of its matmuls, 2 x active parameters x N,
   at the CPU's timed mat-mul rate per weight type (a 128-token batch); plus attention, the
   cells each token sees x its query heads x the time the probe measured per cell, query
   token and head of flash attention on a 128-token batch (ggml's tiled prompt path, per head
   width; without it, 4 x width FLOPs a cell at the f16 mat-mul rate), every query against the
   whole padded view of the cache (the tiles a causal mask hides cost about as much); a batch
   under 64 tokens runs query by query as decode does; plus, per batch, the output
   matrix once (only the batch's last token's logits are computed) and its graph. A GPU's
   arithmetic rate is not known to vramchat, so a plan with GPU layers has no prefill figure.

Every figure says its basis: `measured` (this machine's probe), `learned` (calibrated by the
speed of real replies: the median of measured / predicted), `table` (a spec-sheet or
what-if figure, not timed here), `measuring` (the CPU's figures are not trusted yet: the
probe that would give them was disturbed, app/speed/trust.py) or `unknown`. A figure is always a range: +-30% when
measured (the error bench/speed_predict.py saw before any learning), +-50% from a table,
and from learning the spread of the replies' ratios, never narrower than
`MIN_LEARNED_BAND`, widened while fewer than `ENOUGH_REPLIES` replies exist.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from planner.hardware import Device
from planner.memory import MemoryPlan
from planner.model import ModelAnatomy
from planner.recurrent import rs_layout
from planner.units import EXPERT_TENSOR, format_size, round_up
from planner.weights import HOST_INDEX, weight_buffers

MEASURED, LEARNED, TABLE, UNKNOWN = "measured", "learned", "table", "unknown"
PENDING = "measuring"  # the CPU's figures are being measured: no figure until they are trusted
_BASIS_ORDER = (UNKNOWN, PENDING, TABLE, MEASURED, LEARNED)  # weakest first

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
# the engine's sampler chain (penalties, top-k, top-p, min-p, temperature, a draw) per vocabulary entry,
# llama_sampler_sample's copy of the logits included: 1.0 ms for the demo's 262,144 entries here
SAMPLER_SECONDS_PER_ENTRY = 3.8e-9
# the probe's two sizes (app/speed/probe.py): in cache, and beyond any cache
SMALL_SET = 8 << 20
LARGE_SET = 192 << 20
KV_PAD = 256  # llama.cpp pads the cells attention reads to a multiple of 256
OPS_PER_LAYER_GUESS = 25  # operations of a layer where no graph builder knows the architecture
PROMPT_TOKENS = 512  # the prompt a prefill figure is quoted for
# a batch this long or longer of ops whose weights stay in host memory runs on a GPU that offloads ops
# (ggml-cuda, ggml-vulkan, ggml-metal: op_offload_min_batch_size, GGML_OP_OFFLOAD_MIN_BATCH; ggml-rpc has no
# offload_op, as planner.compute's compute buffers know)
OP_OFFLOAD_MIN_BATCH = 32
MASK_SHORT_VIEW = 512  # a prompt's mask over this view costs nothing more (8x it: the probe's MASK_CELLS)
PREFILL_BATCH, SHORT_BATCH = 128, 32  # the probe's prompt batches (app/speed/probe.py)
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
PREFILL_ROW = 4096  # the width the probe's `prefill_rates` were timed at (app/speed/probe.py: ROW)
REPACKED = " repacked"  # a weight type's suffix in a token's cost where llama.cpp repacks it for this CPU
STREAMED_HEADS = 8  # the query heads a layer the probe timed a cache from memory with (app/speed/probe.py)
SPLIT_KV_CELLS = 512  # from this view on ggml-cpu splits one query's attention by cells between the threads
FA_TILE_QUERIES = 64  # ggml-cpu's GGML_FA_TILE_Q (ggml-cpu/common.h): a batch this long runs attention tiled
FA_TILE_CELLS = 64  # ggml-cpu's GGML_FA_TILE_KV: the cells of a tile its tiled path computes or skips at once

# bands (half-widths as a fraction of the figure)
MEASURED_BAND = 0.30
TABLE_BAND = 0.50
MIN_LEARNED_BAND = 0.05
ENOUGH_REPLIES = 3
MAX_RATIOS = 20  # the newest replies a calibration keeps

# types the probe cannot time (they need an importance matrix to be made): the nearest timed kernel
DECODE_FALLBACK = {
    "q8_1": "q8_0",
    "q8_k": "q8_0",
    "iq2_xxs": "q2_K",
    "iq2_xs": "q2_K",
    "iq2_s": "q2_K",
    "iq3_xxs": "q3_K",
    "iq3_s": "q3_K",
    "iq1_s": "q2_K",
    "iq1_m": "q2_K",
    "tq1_0": "q2_K",
    "tq2_0": "q2_K",
    "nvfp4": "mxfp4",
    "q1_0": "q2_K",
    "q2_0": "q2_K",
}
# a type the device probe did not time (app/speed/device_probe.py: TYPES): the nearest one it did
DEVICE_FALLBACK = {
    "f32": "f16",
    "bf16": "f16",
    "q4_1": "q4_0",
    "q5_1": "q5_0",
    "q2_K": "q4_K",
    "q3_K": "q4_K",
    "iq4_nl": "q4_0",
    "iq4_xs": "q4_K",
    "mxfp4": "q4_0",
}
PREFILL_FALLBACK = {
    "f32": "f16",
    "bf16": "f16",
    "q4_1": "q4_0",
    "q5_1": "q5_0",
    "iq4_nl": "q4_0",
    "iq4_xs": "q4_0",
    "mxfp4": "q4_0",
    "q2_K": "q4_K",
    "q3_K": "q4_K",
    "q5_K": "q4_K",
}
_EXPERT_RE = re.compile(EXPERT_TENSOR)
# the operations between the mat-muls are priced per element by kind (planner.graph_counts.ELEMENTWISE_KINDS:
# the probe times one of each: a GELU gate costs ten times an add, 0.9 ns an element on 2 EPYC cores); the
# rest of them ("plain": adds, multiplies, other activations, copies) at an add's price; the mat-muls by their
# weights, attention by its cells (a softmax's size is the cache's)


# -- the machine ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuSpeed:
    """What the CPU probe measured (app/speed/probe.py), or None where it could not."""

    threads: int
    graph_seconds: float
    op_seconds: float
    decode_rates: dict[str, float]  # ggml type -> bytes/s of a mat-vec that stays in cache
    prefill_rates: dict[str, float]  # ggml type -> FLOP/s of a 128-token mat-mul
    large_factor: float  # the rate beyond the cache / the rate in cache (q8_0)
    read_bandwidth: float  # bytes/s of one large f32 read (reported; the per-type rates decide)
    attention_seconds: dict[str, float] = field(default_factory=dict)  # head width -> s per cell and query head
    source: str = "measured on this machine"
    # head width -> s per cell, query token and query head of a prompt's batch (ggml may batch it otherwise)
    prefill_attention_seconds: dict[str, float] = field(default_factory=dict)
    row_seconds: float = 0.0  # what each row of a matrix streamed from memory adds (q8_0, beyond the cache)
    hidden_cell_seconds: float = 0.0  # a cell the mask hides, per query head: skipped, not computed
    # a cell the mask hides from a whole tile of a prompt's queries, per query and head: the tile is skipped
    # once its mask is converted (included in `prefill_attention_seconds`, whose cells were all visible)
    prefill_hidden_cell_seconds: float = 0.0
    # what a prompt's mask adds per cell, query and head over a view of 8 x MASK_SHORT_VIEW cells beyond what it
    # costs over a short one (the attention figures are timed with a mask, as the engine's graph runs them)
    mask_seconds: float = 0.0
    # row width -> ggml type -> FLOP/s of a 128-token mat-mul of that width (`prefill_rates` is 4096 wide)
    prefill_rates_by_width: dict[str, dict[str, float]] = field(default_factory=dict)
    elementwise_seconds: dict[str, float] = field(default_factory=dict)  # kind -> s an element (ELEMENTWISE_KINDS)
    # ggml type -> FLOP/s of a SHORT_BATCH-token mat-mul 1024 wide (against the same at 128 tokens)
    prefill_rates_short_batch: dict[str, float] = field(default_factory=dict)
    # the same over a matrix no cache holds (a real model's weights, read from memory for every batch)
    prefill_rates_short_beyond: dict[str, float] = field(default_factory=dict)
    # what a mat-mul adds beyond op_seconds and its bytes (its input converted to the weights' dot type, a second
    # synchronisation; its rows handed out in chunks): 0.4-1.1 us here, a tiny model's 29 mat-muls a fifth of a token
    mat_mul_seconds: float = 0.0
    # head width -> KV heads a layer -> seconds a cell adds to each of STREAMED_HEADS query heads when a
    # token's KV cache comes from memory rather than the caches (app/speed/probe.py: streamed_attention)
    attention_streamed_extra: dict[str, dict[str, float]] = field(default_factory=dict)
    # the weight types ggml-cpu repacks on this CPU (CPU_REPACK), timed repacked as llama.cpp runs them:
    # a mat-vec's bytes/s in cache, a prompt's FLOP/s at 128 tokens 4096 wide and at SHORT_BATCH 1024 wide
    decode_rates_repacked: dict[str, float] = field(default_factory=dict)
    prefill_rates_repacked: dict[str, float] = field(default_factory=dict)
    prefill_rates_short_repacked: dict[str, float] = field(default_factory=dict)
    # the engine's sampler chain a token, per vocabulary entry, on one core (0: not timed, SAMPLER_SECONDS_PER_ENTRY)
    sampler_entry_seconds: float = 0.0

    def sampler_seconds(self, n_vocab: int) -> float:
        """What sampling a token over `n_vocab` entries takes on this CPU."""
        return n_vocab * (self.sampler_entry_seconds or SAMPLER_SECONDS_PER_ENTRY)

    def decode_rate(self, type_name: str, working_set: int) -> tuple[float, str | None]:
        """Bytes/s for this type at this working set, and the timed type used when this one was not
        (a type llama.cpp repacks, "q4_0 repacked": its repacked rate where the probe timed one)."""
        type_name, repacked = _repacked(type_name)
        if repacked and type_name in self.decode_rates_repacked:
            return self.decode_rates_repacked[type_name] * self.cache_factor(working_set), None
        name, used = _timed(type_name, self.decode_rates, DECODE_FALLBACK)
        rate = self.decode_rates.get(name) or min(self.decode_rates.values())
        return rate * self.cache_factor(working_set), used

    def cache_factor(self, working_set: int) -> float:
        return float(self.large_factor ** beyond_share(working_set))

    def rows_seconds(self, rows: int, working_set: int) -> float:
        """What `rows` rows of matrices streamed at this working set add beyond their bytes."""
        return rows * self.row_seconds * beyond_share(working_set)

    def attention_cell(self, width: int) -> float:
        """Seconds one cached cell costs one query head of this width (the nearest width timed)."""
        if not self.attention_seconds:
            return 2 * width * 2 / self.decode_rates.get("f16", min(self.decode_rates.values()))
        near = min(self.attention_seconds, key=lambda w: abs(math.log(max(width, 1) / int(w))))
        return self.attention_seconds[near]

    def prefill_attention_cell(self, width: int) -> float:
        """Seconds one cached cell costs one query token and head of a prompt's batch (nearest width timed;
        without a timing, the attention's arithmetic at the f16 mat-mul rate)."""
        if not self.prefill_attention_seconds:
            return 4 * width / self.prefill_rate("f16")[0]
        near = min(self.prefill_attention_seconds, key=lambda w: abs(math.log(max(width, 1) / int(w))))
        return self.prefill_attention_seconds[near]

    def streamed_layer_cell(self, width: int, kv_heads: int) -> float | None:
        """Seconds a cell adds to a layer's attention (all its query heads) when the layer's KV cache comes
        from memory: the nearest width and KV head count timed (None: not timed)."""
        if not self.attention_streamed_extra:
            return None
        near = min(self.attention_streamed_extra, key=lambda w: abs(math.log(max(width, 1) / int(w))))
        by_kv = self.attention_streamed_extra[near]
        kv = min(by_kv, key=lambda k: abs(math.log(max(kv_heads, 1) / int(k))))
        return by_kv[kv] * STREAMED_HEADS

    def prefill_rate(
        self, type_name: str, width: float = 0.0, tokens: int = 0, working_set: int = 0
    ) -> tuple[float, str | None]:
        """FLOP/s of a prompt's mat-mul of this type, rows `width` wide (geometric between the widths
        timed; 0: the probe's 4096), over a batch of `tokens` (under 128, slower: geometric down to the
        rate timed at SHORT_BATCH, and that between the rates in cache and beyond it by the model's
        `working_set`; 0: 128), and the timed type used when this one was not."""
        type_name, repacked = _repacked(type_name)
        name, used = _timed(type_name, self.prefill_rates, PREFILL_FALLBACK)
        rate = self._width_rate(name, width)
        wide = self.prefill_rates_by_width.get("1024", {}).get(name)
        short = self.prefill_rates_short_batch.get(name)
        beyond = self.prefill_rates_short_beyond.get(name)
        if short and beyond:
            short *= (beyond / short) ** beyond_share(working_set)
        share = 0.0  # how short the batch is: 0 from PREFILL_BATCH tokens up, 1 at SHORT_BATCH or fewer
        if tokens and tokens < PREFILL_BATCH:
            share = min(1.0, math.log(PREFILL_BATCH / tokens) / math.log(PREFILL_BATCH / SHORT_BATCH))
        if share and wide and short and short < wide:
            rate *= (short / wide) ** share
        # repacked: the plain type's rate at this width and batch, times what repacking gained (or lost) where
        # both were timed, at 128 tokens and at SHORT_BATCH
        long_repacked, short_repacked = (
            self.prefill_rates_repacked.get(type_name),
            self.prefill_rates_short_repacked.get(type_name),
        )
        plain_long, plain_short = self.prefill_rates.get(name), self.prefill_rates_short_batch.get(name)
        if repacked and long_repacked and plain_long:
            gain = long_repacked / plain_long
            if short_repacked and plain_short:
                gain *= (short_repacked / plain_short / gain) ** share
            return rate * gain, None
        return rate, used

    def _width_rate(self, name: str, width: float) -> float:
        """The timed type's prompt mat-mul rate at this row width (0: the probe's 4096)."""
        rate = self.prefill_rates.get(name) or min(self.prefill_rates.values())
        points = sorted(
            [(PREFILL_ROW, rate)] + [(int(w), r[name]) for w, r in self.prefill_rates_by_width.items() if r.get(name)]
        )
        if width <= 0 or len(points) == 1:
            return rate
        if width <= points[0][0]:
            return points[0][1]
        for (w0, r0), (w1, r1) in itertools.pairwise(points):
            if width <= w1:
                share = math.log(width / w0) / math.log(w1 / w0)
                return float(r0 * (r1 / r0) ** share)
        return points[-1][1]

    def elementwise(self, elements: dict[str, int]) -> float:
        """Seconds the operations between the mat-muls take over these elements (by kind)."""
        plain = self.elementwise_seconds.get("plain", 0.0)
        return sum(n * self.elementwise_seconds.get(kind, plain) for kind, n in elements.items())

    def to_json(self) -> dict[str, Any]:
        return {
            "threads": self.threads,
            "graph_seconds": self.graph_seconds,
            "op_seconds": self.op_seconds,
            "decode_rates": dict(self.decode_rates),
            "prefill_rates": dict(self.prefill_rates),
            "large_factor": self.large_factor,
            "read_bandwidth": self.read_bandwidth,
            "attention_seconds": dict(self.attention_seconds),
            "prefill_attention_seconds": dict(self.prefill_attention_seconds),
            "row_seconds": self.row_seconds,
            "hidden_cell_seconds": self.hidden_cell_seconds,
            "prefill_hidden_cell_seconds": self.prefill_hidden_cell_seconds,
            "mask_seconds": self.mask_seconds,
            "prefill_rates_by_width": {w: dict(r) for w, r in self.prefill_rates_by_width.items()},
            "elementwise_seconds": dict(self.elementwise_seconds),
            "prefill_rates_short_batch": dict(self.prefill_rates_short_batch),
            "prefill_rates_short_beyond": dict(self.prefill_rates_short_beyond),
            "mat_mul_seconds": self.mat_mul_seconds,
            "attention_streamed_extra": {w: dict(by_kv) for w, by_kv in self.attention_streamed_extra.items()},
            "decode_rates_repacked": dict(self.decode_rates_repacked),
            "prefill_rates_repacked": dict(self.prefill_rates_repacked),
            "prefill_rates_short_repacked": dict(self.prefill_rates_short_repacked),
            "sampler_entry_seconds": self.sampler_entry_seconds,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CpuSpeed:
        return cls(
            threads=int(data["threads"]),
            graph_seconds=float(data["graph_seconds"]),
            op_seconds=float(data["op_seconds"]),
            decode_rates={str(k): float(v) for k, v in data["decode_rates"].items()},
            prefill_rates={str(k): float(v) for k, v in data["prefill_rates"].items()},
            large_factor=float(data["large_factor"]),
            read_bandwidth=float(data["read_bandwidth"]),
            attention_seconds={str(k): float(v) for k, v in data["attention_seconds"].items() if v},
            source=str(data.get("source", "measured on this machine")),
            prefill_attention_seconds={
                str(k): float(v) for k, v in (data.get("prefill_attention_seconds") or {}).items() if v
            },
            row_seconds=float(data.get("row_seconds") or 0.0),
            hidden_cell_seconds=float(data.get("hidden_cell_seconds") or 0.0),
            prefill_hidden_cell_seconds=float(data.get("prefill_hidden_cell_seconds") or 0.0),
            mask_seconds=float(data.get("mask_seconds") or 0.0),
            prefill_rates_by_width={
                str(w): {str(k): float(v) for k, v in rates.items() if v}
                for w, rates in (data.get("prefill_rates_by_width") or {}).items()
            },
            elementwise_seconds={str(k): float(v) for k, v in (data.get("elementwise_seconds") or {}).items()},
            prefill_rates_short_batch={
                str(k): float(v) for k, v in (data.get("prefill_rates_short_batch") or {}).items() if v
            },
            prefill_rates_short_beyond={
                str(k): float(v) for k, v in (data.get("prefill_rates_short_beyond") or {}).items() if v
            },
            mat_mul_seconds=float(data.get("mat_mul_seconds") or 0.0),
            attention_streamed_extra={
                str(w): {str(kv): float(v) for kv, v in by_kv.items()}
                for w, by_kv in (data.get("attention_streamed_extra") or {}).items()
            },
            decode_rates_repacked=_rates(data, "decode_rates_repacked"),
            prefill_rates_repacked=_rates(data, "prefill_rates_repacked"),
            prefill_rates_short_repacked=_rates(data, "prefill_rates_short_repacked"),
            sampler_entry_seconds=float(data.get("sampler_entry_seconds") or 0.0),
        )


def beyond_share(working_set: int) -> float:
    """How far a working set is beyond the cache: 0 within SMALL_SET, 1 from LARGE_SET, geometric between."""
    if working_set <= SMALL_SET:
        return 0.0
    if working_set >= LARGE_SET:
        return 1.0
    return math.log(working_set / SMALL_SET) / math.log(LARGE_SET / SMALL_SET)


def _repacked(type_name: str) -> tuple[str, bool]:
    """The weight type without its REPACKED suffix, and whether it had one."""
    if type_name.endswith(REPACKED):
        return type_name[: -len(REPACKED)], True
    return type_name, False


def _rates(data: dict[str, Any], key: str) -> dict[str, float]:
    return {str(k): float(v) for k, v in (data.get(key) or {}).items() if v}


def _timed(type_name: str, rates: dict[str, float], fallback: dict[str, str]) -> tuple[str, str | None]:
    """The timed type for `type_name` (ggml spells the K-quants with a capital K)."""
    for name in (type_name, type_name.replace("_k", "_K")):
        if name in rates:
            return name, None
    near = fallback.get(type_name) or fallback.get(type_name.lower())
    if near and near in rates:
        return near, near
    return "q8_0" if "q8_0" in rates else next(iter(rates)), "q8_0"


# -- what one token costs, from the plan ---------------------------------------------------------


@dataclass
class DeviceCost:
    """What one decoded token reads and computes on one device (the host is "CPU")."""

    name: str
    backend: str  # cpu, cuda, rocm, metal, vulkan, rpc
    weights: dict[str, int] = field(default_factory=dict)  # ggml type -> bytes read per token
    output_bytes: int = 0  # of which the output matrix (prefill reads it once per prompt)
    output_type: str = ""
    params: dict[str, int] = field(default_factory=dict)  # ggml type -> weights multiplied per token
    rows: int = 0  # matrix rows a token streams (each costs CpuSpeed.row_seconds beyond the cache)
    output_rows: int = 0  # of which the output matrix's
    output_params: int = 0
    kv_cell: dict[str, int] = field(default_factory=dict)  # K/V type -> bytes per cell, full-context layers
    kv_cell_swa: dict[str, int] = field(default_factory=dict)  # the same, sliding-window layers
    attn_heads: dict[str, int] = field(default_factory=dict)  # head width -> query heads, full-context layers
    attn_heads_swa: dict[str, int] = field(default_factory=dict)  # the same, sliding-window layers
    # "width/KV heads" -> layers of that shape: what decides a cache's cost when it comes from memory
    attn_layouts: dict[str, int] = field(default_factory=dict)  # full-context layers
    attn_layouts_swa: dict[str, int] = field(default_factory=dict)  # sliding-window layers
    state_bytes: int = 0  # recurrent state read and written per token
    layers: int = 0
    ops: int = 0  # graph operations a token runs here
    mat_muls: int = 0  # of which mat-muls (each costs CpuSpeed.mat_mul_seconds more)
    elements: dict[str, int] = field(default_factory=dict)  # their elements between the mat-muls, by kind
    params_log_width: dict[str, float] = field(default_factory=dict)  # ggml type -> sum of params x log2(row)

    @property
    def is_host(self) -> bool:
        return self.backend == "cpu"

    def weight_bytes(self) -> int:
        return sum(self.weights.values())

    def kv_bytes(self, cells: int, cells_swa: int) -> int:
        return cells * sum(self.kv_cell.values()) + cells_swa * sum(self.kv_cell_swa.values())

    def to_json(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeviceCost:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class TokenCost:
    """A plan's per-token cost: everything the speed formula needs but the machine's figures."""

    devices: list[DeviceCost]  # in the order a token passes them (host first, as llama.cpp's layers)
    n_vocab: int
    n_embd: int
    n_ctx: int
    n_ubatch: int
    cells: int  # KV cells of the full-context cache
    cells_swa: int  # KV cells of the sliding-window cache (0: none)
    splits: list[str] = field(default_factory=list)  # backend of each hand-over between devices
    n_swa: int = 0  # the sliding window's length (0: none, or unknown in a cost kept before)
    ops_exact: bool = True  # the operations were counted on the graph llama.cpp builds
    notes: list[str] = field(default_factory=list)
    # the GPUs llama.cpp hands a prompt's mat-muls of host weights to (op offload: a batch of
    # OP_OFFLOAD_MIN_BATCH tokens or more), even with no layer on them
    prompt_offload: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "devices"}
        data["devices"] = [d.to_json() for d in self.devices]
        data["splits"], data["notes"] = list(self.splits), list(self.notes)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenCost:
        known = set(cls.__dataclass_fields__) - {"devices"}  # a cost kept before a field was added has its default
        fields = {k: data[k] for k in known & set(data)}
        return cls(devices=[DeviceCost.from_json(d) for d in data["devices"]], **fields)

    def cells_at(self, fill: int) -> tuple[int, int]:
        """The cells of the cache's view at a fill of `fill` tokens, padded to KV_PAD as llama.cpp hands
        them to attention: (full-context cache, sliding-window cache)."""
        padded = min(self.cells, round_up(max(fill, 1), KV_PAD)) if self.cells else 0
        return padded, min(self.cells_swa, padded) if self.cells_swa else 0

    def visible_at(self, seen: float) -> tuple[float, float]:
        """The cells a query at `seen` tokens attends to (the mask hides the rest of the view, and a
        sliding-window layer's cells beyond its window): (full-context cache, sliding-window cache)."""
        full = min(self.cells, seen) if self.cells else 0.0
        window = self.n_swa or self.cells_swa
        return full, min(self.cells_swa, window, seen) if self.cells_swa else 0.0


def _graph_counts(plan: MemoryPlan) -> tuple[int, int, dict[str, int]] | None:
    """Operations a one-token graph runs (views and reshapes cost nothing), of which mat-muls, and the
    elements its operations between the mat-muls produce, by kind (ELEMENTWISE_KINDS), from the graph
    llama.cpp builds; None where no graph builder knows the architecture. The compute pricing builds the same
    graph and notes its counts (planner.graph_counts): it is built here only where it did not."""
    from planner import graph_counts

    m, r = plan.model, plan.resolved
    key = graph_counts.key_of(m, r)
    known, counts = graph_counts.noted(key)
    if not known:
        from planner.compute import build_graph  # the graph builders: only when a count is not known
        from planner.errors import PlannerError

        try:
            counts = graph_counts.count(build_graph(m, r, plan.kv, 1, 1, 1).g)
        except (PlannerError, ArithmeticError, ValueError, KeyError, IndexError, TypeError, AttributeError):
            counts = None
        graph_counts.note(key, counts)
    return counts


def _expert_share(model: ModelAnatomy, layer: int) -> float:
    experts = model.experts
    if experts is None or not experts.n_expert:
        return 1.0
    used = experts.n_used
    if experts.n_used_per_layer and layer < len(experts.n_used_per_layer):
        used = experts.n_used_per_layer[layer] or used
    return min(1.0, used / experts.n_expert)


def _elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def token_cost(plan: MemoryPlan) -> TokenCost:
    """Bytes read, weights multiplied and operations run per decoded token, per device (see the module)."""
    m, r = plan.model, plan.resolved
    # the devices as planned, with the rule that keeps a tensor too large for one on the host
    gpus = [Device(d.name, "gpu", d.backend, d.total, d.free, max_tensor_bytes=d.max_tensor_bytes) for d in plan.gpus]
    gpus_used = gpus if (r.n_gpu_layers > 0 or r.config.op_offload) else []
    wb = weight_buffers(m, r, plan.placement, gpus_used, plan.cpu_features)
    host = DeviceCost("CPU", "cpu")
    devices = [DeviceCost(d.name, d.backend) for d in gpus]

    def on(index: int) -> DeviceCost:
        return host if index == HOST_INDEX or not gpus_used else devices[index]

    def read(
        target: DeviceCost, type_name: str, nbytes: float, params: float, output: bool = False, rows: float = 0
    ) -> None:
        target.weights[type_name] = target.weights.get(type_name, 0) + round(nbytes)
        target.rows += round(rows)
        if output:
            target.output_bytes += round(nbytes)
            target.output_type = type_name
            target.output_params += round(params)
            target.output_rows += round(rows)
        elif params:
            target.params[type_name] = target.params.get(type_name, 0) + round(params)
            width = params / rows if rows else 1.0
            book = target.params_log_width
            book[type_name] = book.get(type_name, 0.0) + params * math.log2(max(width, 1.0))

    def type_of(t: Any) -> str:
        """The weight's type, marked where llama.cpp repacks it for this CPU (its kernels differ)."""
        name = str(t.type.name)
        return name + REPACKED if t.name in wb.repacked else name

    for t in m.input_tensors:  # looked up: one row a token
        rows = t.shape[1] if len(t.shape) > 1 else 1
        read(host, t.type.name, t.n_bytes / max(rows, 1), 0)
    for layer in m.layers:
        if layer.is_mtp:
            continue
        share = _expert_share(m, layer.index)
        for t in layer.tensors:
            target = on(wb.tensor_device.get(t.name, HOST_INDEX))
            fraction = share if _EXPERT_RE.search(t.name) else 1.0
            matrix = len(t.shape) >= 2 and not t.name.endswith(".bias")
            params = _elements(t.shape) * fraction if matrix else 0
            read(target, type_of(t), t.n_bytes * fraction, params, rows=params / t.shape[0] if matrix else 0)
    for t in m.other_tensors:
        read(on(wb.tensor_device.get(t.name, HOST_INDEX)), t.type.name, t.n_bytes, 0)
    # the output matmul runs where its weight lives: a matrix over a device's largest tensor stays on the
    # host (planner.weights), and a tied output's copy is the embedding itself there (wb.output_copy)
    out_device = on(plan.placement.output)
    for t in m.output_tensors:
        matrix = len(t.shape) >= 2
        target = on(wb.tensor_device.get(t.name, plan.placement.output))
        rows = _elements(t.shape) // t.shape[0] if matrix else 0
        read(target, type_of(t), t.n_bytes, _elements(t.shape) if matrix else 0, output=matrix, rows=rows)
    if m.tied_output:
        embd = m.tensor("token_embd.weight")
        if embd is not None:
            copy = out_device if m.output_is_token_embd else on(wb.output_copy)
            rows = _elements(embd.shape) // embd.shape[0]
            read(copy, embd.type.name, embd.n_bytes, _elements(embd.shape), output=True, rows=rows)

    by_layer = {layer.index: layer for layer in m.layers}
    for kt in plan.kv.tensors:
        target = on(plan.placement.layers[kt.layer] if r.config.offload_kqv else HOST_INDEX)
        cell = kt.type.row_bytes(kt.ne[0])  # one cell of one sequence's stream
        book = target.kv_cell_swa if kt.swa else target.kv_cell
        book[kt.type.name] = book.get(kt.type.name, 0) + cell
        layer = by_layer[kt.layer]
        if kt.kind == "k":
            width = str((layer.head_dim_k + (layer.head_dim_v or layer.head_dim_k)) // 2)
            heads = target.attn_heads_swa if kt.swa else target.attn_heads
            heads[width] = heads.get(width, 0) + layer.n_head
            layouts = target.attn_layouts_swa if kt.swa else target.attn_layouts
            shape = f"{width}/{layer.n_head_kv}"
            layouts[shape] = layouts.get(shape, 0) + 1
    for st in rs_layout(m, r).tensors:
        target = on(plan.placement.layers[st.layer] if r.config.offload_kqv else HOST_INDEX)
        target.state_bytes += 2 * st.nbytes // max(r.n_seq_max, 1)  # read, then written back

    for il, index in enumerate(plan.placement.layers):
        if not by_layer[il].is_mtp:
            on(index).layers += 1
    counts = _graph_counts(plan)
    notes = []
    elements: dict[str, int]
    if counts is None:
        ops, mat_muls, elements = OPS_PER_LAYER_GUESS * m.n_trunk + 8, 0, {}
        notes.append(f"graph operations estimated ({OPS_PER_LAYER_GUESS} a layer): no graph builder for this model")
    else:
        ops, mat_muls, elements = counts
    share = 1 / max(m.n_trunk, 1)
    for d in [host, *devices]:
        d.ops = round(ops * share * d.layers)
        d.mat_muls = round(mat_muls * share * d.layers)
        d.elements = {kind: round(n * share * d.layers) for kind, n in elements.items()}
    out_device.ops += max(ops - sum(d.ops for d in [host, *devices]), 0)
    out_device.mat_muls += max(mat_muls - sum(d.mat_muls for d in [host, *devices]), 0)
    for kind, n in elements.items():
        out_device.elements[kind] = out_device.elements.get(kind, 0) + max(
            n - sum(d.elements.get(kind, 0) for d in [host, *devices]), 0
        )

    # a token passes the host (input), then the layers in order, then the output layer's device
    order: list[DeviceCost] = [host]
    for index in [*plan.placement.layers, plan.placement.output]:
        d = on(index)
        if d is not order[-1]:
            order.append(d)
    splits = [b.backend if b.backend != "cpu" else a.backend for a, b in itertools.pairwise(order)]
    on_cpu = plan.ops_on_cpu
    if on_cpu is not None and on_cpu.splits > on_cpu.splits_on_device:
        # ops a device refused run on the CPU: each one more hand-over there and back (their own time there
        # is not priced: the CPU's rate for an op it runs alone is not probed)
        refusing = next((d.backend for d in plan.gpus if d.name == on_cpu.ops[0][1]), "vulkan")
        splits += [refusing] * (on_cpu.splits - on_cpu.splits_on_device)
        notes.append(
            f"{on_cpu.splits - on_cpu.splits_on_device} more hand-overs between devices a token: "
            f"{', '.join(sorted({op for op, _, _ in on_cpu.ops}))} on the CPU (its time there is not priced)"
        )
    used = [host] + [d for d in devices if d.weights or d.layers]
    repacked = sum(t.n_bytes for t in _all_tensors(m) if t.name in wb.repacked)
    if repacked:
        notes.append(
            f"{repacked / 2**20:.0f} MiB of host weights run repacked for this CPU (CPU_REPACK), "
            "at the rates the probe timed repacked"
        )
    return TokenCost(
        used,
        m.n_vocab,
        m.n_embd,
        r.n_ctx,
        r.n_ubatch,
        plan.kv.cells if plan.kv.tensors else 0,
        plan.kv.cells_swa if any(t.swa for t in plan.kv.tensors) else 0,
        splits,
        n_swa=m.n_swa if any(t.swa for t in plan.kv.tensors) else 0,
        ops_exact=not notes or not notes[0].startswith("graph"),
        notes=notes,
        prompt_offload=[d.name for d in gpus_used if d.backend != "rpc"] if r.config.op_offload else [],
    )


def _all_tensors(model: ModelAnatomy) -> list[Any]:
    out = list(model.input_tensors) + list(model.output_tensors) + list(model.other_tensors)
    for layer in model.layers:
        out += layer.tensors
    return out


# -- the prediction ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSpeed:
    """A GPU's memory bandwidth (bytes/s) and where the figure comes from; None where unknown."""

    name: str
    bandwidth: float | None
    source: str = ""
    measured: bool = False  # timed on the device (a mat-vec through ggml), not read off a spec sheet
    pending: str = ""  # why its figure is still being measured (a probe disturbed by other programs)
    type_rates: dict[str, float] = field(default_factory=dict)  # ggml type -> bytes/s of its mat-vec, timed there
    op_seconds: float | None = None  # what each operation of a graph adds there, timed (None: GPU_OP_SECONDS)
    graph_seconds: float | None = None  # a one-operation graph there, timed (None: GPU_GRAPH_SECONDS)

    def weights_seconds(self, weights: dict[str, int]) -> float | None:
        """Seconds the device's mat-vecs take over these bytes per type, at the rates timed there (the
        nearest timed type for another); None where no type was timed."""
        if not self.type_rates:
            return None
        slowest = min(self.type_rates.values())
        total = 0.0
        for name, nbytes in weights.items():
            timed = name if name in self.type_rates else DEVICE_FALLBACK.get(name, "")
            total += nbytes / self.type_rates.get(timed, slowest)
        return total


@dataclass(frozen=True)
class Calibration:
    """Measured / predicted speed of real replies, newest last, and whose replies they were."""

    decode_ratios: tuple[float, ...] = ()
    prefill_ratios: tuple[float, ...] = ()
    scope: str = "this model and configuration"


@dataclass(frozen=True)
class Figure:
    """A predicted speed in tokens per second, with its range and basis; value None when unknown."""

    value: float | None
    low: float | None
    high: float | None
    basis: str
    note: str = ""
    replies: int = 0

    def to_json(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 1)

        return {
            "tokens_per_second": r(self.value),
            "low": r(self.low),
            "high": r(self.high),
            "basis": self.basis,
            "replies": self.replies,
            "note": self.note,
        }

    def text(self) -> str:
        if self.basis == PENDING:  # why is said once, in the prediction's notes
            return "measuring…"
        if self.value is None or self.low is None or self.high is None:
            return f"unknown ({self.note})" if self.note else "unknown"
        span = f"{_num(self.low)}–{_num(self.high)}"
        if self.basis == LEARNED and self.replies >= ENOUGH_REPLIES:
            return f"≈{_num(self.value)} tok/s ({span}, {self.note})"
        return f"{span} tok/s ({self.note or self.basis})"


def _span(f: Figure) -> str:
    """ "≈38 (35–40)" once enough replies taught it, else the range "30–45"."""
    assert f.value is not None and f.low is not None and f.high is not None
    if f.basis == LEARNED and f.replies >= ENOUGH_REPLIES:
        return f"≈{_num(f.value)} ({_num(f.low)}–{_num(f.high)})"
    return f"{_num(f.low)}–{_num(f.high)}"


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.1f}"


@dataclass(frozen=True)
class DeviceSpeed:
    name: str
    basis: str
    source: str
    bytes_per_token: int
    seconds_per_token: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "basis": self.basis,
            "source": self.source,
            "bytes_per_token": self.bytes_per_token,
            "seconds_per_token": None if self.seconds_per_token is None else round(self.seconds_per_token, 6),
        }


@dataclass(frozen=True)
class SpeedPrediction:
    """Decode at the start and at a full context, prefill of a 512-token prompt: each a Figure."""

    decode_start: Figure
    decode_full: Figure
    prefill: Figure
    n_ctx: int
    devices: list[DeviceSpeed]
    notes: list[str]
    raw_decode_start: float | None = None  # before any learning (what a reply is compared with)

    @property
    def basis(self) -> str:
        bases = [f.basis for f in (self.decode_start, self.prefill)]
        known = [b for b in bases if b != UNKNOWN]
        if not known:
            return UNKNOWN
        return min(known, key=_BASIS_ORDER.index)

    @property
    def measuring(self) -> bool:
        """Whether the figure waits for a trusted probe of this CPU (shown as "measuring…")."""
        return self.decode_start.basis == PENDING

    def to_json(self) -> dict[str, Any]:
        return {
            "basis": self.basis,
            "measuring": self.measuring,
            "decode_start": self.decode_start.to_json() | {"context_tokens": 0},
            "decode_full": self.decode_full.to_json() | {"context_tokens": self.n_ctx},
            "prefill": self.prefill.to_json() | {"prompt_tokens": PROMPT_TOKENS},
            "devices": [d.to_json() for d in self.devices],
            "notes": list(self.notes),
        }

    def line(self) -> str:
        """One line for the picker: decode at the start and at a full context, the prompt, the basis."""
        start = self.decode_start
        if start.basis == PENDING:
            return f"Speed: measuring… ({start.note})"
        if start.value is None:
            return f"Speed: {start.text()}"
        parts = [f"{_span(start)} tok/s at the start"]
        if self.decode_full.value is not None:
            parts.append(f"{_span(self.decode_full)} at {self.n_ctx:,} tokens")
        if self.prefill.value is not None:
            parts.append(f"prompt {_span(self.prefill)} tok/s")
        return f"Speed: {', '.join(parts)} ({start.note or start.basis})"

    def cell(self) -> str:
        """The file's speed in a table whose column says tok/s: the decode at the start of a chat as
        "34–64" (a range), "≈41" (learned from enough replies), "measuring…" or "?". Every list of
        files shows this one text (the model list, the hub, --quants); --plan shows the same range."""
        f = self.decode_start
        if f.basis == PENDING:
            return "measuring…"
        if f.value is None or f.low is None or f.high is None:
            return "?"
        if f.basis == LEARNED and f.replies >= ENOUGH_REPLIES:
            return f"≈{_num(f.value)}"
        return f"{_num(f.low)}–{_num(f.high)}"

    def short(self) -> str:
        """`cell` with its unit, for a column that does not say it."""
        cell = self.cell()
        return cell if self.measuring else f"{cell} tok/s"

    def text(self) -> str:
        """The `--plan` table's section."""
        rows = (
            ("decode at the start", self.decode_start),
            (f"decode at {self.n_ctx:,} tokens", self.decode_full),
            (f"prompt of {PROMPT_TOKENS} tokens", self.prefill),
        )
        lines = ["Speed (predicted before the load)"] + [f"  {label:<26}{f.text()}" for label, f in rows]
        for d in self.devices:
            per = "" if d.seconds_per_token is None else f", {d.seconds_per_token * 1000:.2f} ms a token"
            lines.append(f"  {d.name:<8} reads {format_size(d.bytes_per_token)} a token{per}: {d.source}")
        lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Time:
    seconds: float | None  # None: a device with no figure
    basis: str
    per_device: list[tuple[DeviceCost, float | None, str, str]]  # (device, seconds, basis, source)
    notes: tuple[str, ...] = ()


def decode_seconds(cost: TokenCost, fill: int, cpu: CpuSpeed | None, gpus: dict[str, GpuSpeed]) -> _Time:
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
                plain, repacked = _repacked(type_name)
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
        return _Time(None, UNKNOWN, parts, tuple(dict.fromkeys(notes)))
    return _Time(total, basis, parts, tuple(dict.fromkeys(notes)))


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


def prefill_seconds(cost: TokenCost, n_tokens: int, start: int, cpu: CpuSpeed | None) -> _Time:
    """Seconds a prompt of `n_tokens` takes after `start` tokens already in the cache (CPU plans only)."""
    if any(not d.is_host for d in cost.devices):
        return _Time(None, UNKNOWN, [], ("a GPU's arithmetic rate is not known to vramchat",))
    if cost.prompt_offload and min(n_tokens, cost.n_ubatch) >= OP_OFFLOAD_MIN_BATCH:
        # ggml_backend_sched hands an op whose weights are in host memory to a GPU that wants it: CUDA, Vulkan
        # and Metal take a batch of 32 tokens or more (ggml-backend.cpp, `1.off`). A lent H200 read the demo's
        # 512-token prompt at 8,782 tok/s with no layer on the GPU, where the CPU's price was 1,178
        gpus = ", ".join(cost.prompt_offload)
        why = f"llama.cpp reads a prompt's batches on {gpus} (op offload), whose arithmetic rate vramchat does not know"
        return _Time(None, UNKNOWN, [], (why,))
    if cpu is None:
        return _Time(None, UNKNOWN, [], ("this CPU's speed was not measured",))
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
    return _Time(seconds, MEASURED, [], ())


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


def _band(basis: str) -> float:
    return TABLE_BAND if basis == TABLE else MEASURED_BAND


def _figure(raw: float | None, basis: str, ratios: tuple[float, ...], scope: str, why: str = "") -> Figure:
    """A figure from a raw prediction (tok/s) and the ratios real replies measured against it."""
    if raw is None or raw <= 0:
        return Figure(None, None, None, UNKNOWN, why)
    if not ratios:
        band = _band(basis)
        return Figure(raw, raw * (1 - band), raw * (1 + band), basis, basis)
    ratios = ratios[-MAX_RATIOS:]
    n = len(ratios)
    mid = statistics.median(ratios)
    # the band: the replies' own spread, and while few exist, the unlearned band shrinking with their count
    spread = max(abs(max(ratios) - mid), abs(mid - min(ratios))) / mid
    floor = MEASURED_BAND / math.sqrt(n + 1) if n < ENOUGH_REPLIES else 0.0
    half = min(max(spread, floor, MIN_LEARNED_BAND), _band(basis))
    value = raw * mid
    words = "reply" if n == 1 else "replies"
    note = f"learned from {n} {words}" + ("" if scope == "this model and configuration" else f" ({scope})")
    return Figure(value, value * (1 - half), value * (1 + half), LEARNED, note, n)


def predict(
    cost: TokenCost,
    cpu: CpuSpeed | None,
    gpus: dict[str, GpuSpeed] | None = None,
    calibration: Calibration | None = None,
    cpu_pending: str = "",
) -> SpeedPrediction:
    """The speed of a plan whose per-token cost is `cost`, on this machine's figures. `cpu_pending`,
    with no `cpu`: why the CPU's figures are still being measured (the figures that need them then
    read "measuring…", not "unknown")."""
    gpus = gpus or {}
    cal = calibration or Calibration()
    start = decode_seconds(cost, 0, cpu, gpus)
    full = decode_seconds(cost, cost.n_ctx, cpu, gpus)
    pre = prefill_seconds(cost, PROMPT_TOKENS, 0, cpu)
    why = "; ".join(s for _, sec, _, s in start.per_device if sec is None) or "no figure"

    def rate(t: _Time) -> float | None:
        return 1.0 / t.seconds if t.seconds else None

    pre_rate = PROMPT_TOKENS / pre.seconds if pre.seconds else None
    devices = [
        DeviceSpeed(d.name, basis, source, d.weight_bytes() + d.state_bytes, sec)
        for d, sec, basis, source in start.per_device
    ]
    notes = list(cost.notes) + list(start.notes)
    # a figure missing only figures that are being measured (the CPU's, a device's whose probe was
    # disturbed) is pending rather than unknown
    waiting = bool(cpu is None and cpu_pending)
    missing = [(d, basis) for d, sec, basis, _ in start.per_device if sec is None]
    devices_waiting = bool(missing) and all(b == PENDING or (d.is_host and waiting) for d, b in missing)
    waits = [cpu_pending] if waiting and any(d.is_host for d, _ in missing) else []
    waits += [s for d, _, b, s in start.per_device if b == PENDING and not d.is_host]
    pending_note = "; ".join(waits)

    def pending(f: Figure, needs_cpu: bool) -> Figure:
        return Figure(None, None, None, PENDING, pending_note) if f.value is None and needs_cpu else f

    return SpeedPrediction(
        decode_start=pending(_figure(rate(start), start.basis, cal.decode_ratios, cal.scope, why), devices_waiting),
        decode_full=pending(_figure(rate(full), full.basis, cal.decode_ratios, cal.scope, why), devices_waiting),
        prefill=pending(
            _figure(pre_rate, pre.basis, cal.prefill_ratios, cal.scope, "; ".join(pre.notes) or why),
            waiting and all(d.is_host for d in cost.devices),
        ),
        n_ctx=cost.n_ctx,
        devices=devices,
        notes=list(dict.fromkeys(notes)),
        raw_decode_start=rate(start),
    )


def predicted_decode(cost: TokenCost, fill: int, cpu: CpuSpeed | None, gpus: dict[str, GpuSpeed]) -> float | None:
    """Raw decode tok/s at a fill, before learning (what a reply's measured speed is compared with)."""
    t = decode_seconds(cost, fill, cpu, gpus)
    return 1.0 / t.seconds if t.seconds else None


def predicted_prefill(cost: TokenCost, n_tokens: int, start: int, cpu: CpuSpeed | None) -> float | None:
    t = prefill_seconds(cost, n_tokens, start, cpu)
    return n_tokens / t.seconds if t.seconds else None
