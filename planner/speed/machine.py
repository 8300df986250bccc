"""This machine's speed figures as the planner reads them: what the CPU probe timed (CpuSpeed) and
what a GPU's memory streams at (GpuSpeed). The app measures them (app/speed/probe.py, the CPU's;
app/speed/device_probe.py and app/devices/bandwidth.py, a GPU's) and keeps them per machine
(app/speed/machine.py); planner.speed.timing spends them.

A CPU on a few cores is bound by the dequantising arithmetic as much as by memory, so its rate is
timed per weight type (app/speed/probe.py: ggml's own mat-vec with the engine's threads): `rate(type)`
bytes/s for a matrix that stays in cache, times one slowdown factor `large_factor`
measured on a matrix that cannot (q8_0, 192 MiB), for the part of the token's working
set that is beyond the cache. Between 8 MiB (in cache) and 192 MiB (beyond) the factor
is interpolated geometrically in the working set (`beyond_share`). On this machine the same factor held
for six types within 10% (a q5_0 matrix slows as much as a q8_0 one). Beyond the cache each
matrix row also costs a latency of its own (`row_seconds`, timed on q8_0 rows 512 and 4096
wide): ggml hands the threads 16 rows at a time, and short rows cut the stream into small
pieces (the demo's 640-wide output matrix streams at 60% of a 4096-wide one's rate). The CPU's
attention costs per cached cell and query head (a dot product, an online-softmax step
and a scaled add in ggml's flash-attention kernel), timed per head width (32 to 256: ggml
runs a head in SIMD steps of 32 or 64 and the rest one by one, 20 ns a cell-head at 32
against 6 at 64 on an AVX-512 CPU), and is slowed by the same factor once the working set
spills out of the cache.

A prompt's mat-muls are timed per weight type as FLOP/s (a 128-token batch 4096 wide; other widths and
SHORT_BATCH tokens where the probe timed them), the weight types ggml-cpu repacks for this CPU as they
run repacked, and the engine's sampler chain per vocabulary entry on one core (`sampler_entry_seconds`:
3.7 ns on a 2-core EPYC; the table's `SAMPLER_SECONDS_PER_ENTRY` where no probe timed it). A type the
probe cannot time is priced as the nearest one it did (DECODE_FALLBACK, PREFILL_FALLBACK, DEVICE_FALLBACK).

A GPU's figure is its memory bandwidth, read off a spec sheet or timed on the device (a mat-vec through
ggml, per weight type where the device probe timed them), with what an operation and a graph cost there
where those were timed.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

# the engine's sampler chain (penalties, top-k, top-p, min-p, temperature, a draw) per vocabulary entry,
# llama_sampler_sample's copy of the logits included: 1.0 ms for the demo's 262,144 entries here
SAMPLER_SECONDS_PER_ENTRY = 3.8e-9
# the probe's two sizes (app/speed/probe.py): in cache, and beyond any cache
SMALL_SET = 8 << 20
LARGE_SET = 192 << 20
PREFILL_BATCH, SHORT_BATCH = 128, 32  # the probe's prompt batches (app/speed/probe.py)
PREFILL_ROW = 4096  # the width the probe's `prefill_rates` were timed at (app/speed/probe.py: ROW)
REPACKED = " repacked"  # a weight type's suffix in a token's cost where llama.cpp repacks it for this CPU
STREAMED_HEADS = 8  # the query heads a layer the probe timed a cache from memory with (app/speed/probe.py)

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
# the operations between the mat-muls are priced per element by kind (planner.graph_counts.ELEMENTWISE_KINDS:
# the probe times one of each: a GELU gate costs ten times an add, 0.9 ns an element on 2 EPYC cores); the
# rest of them ("plain": adds, multiplies, other activations, copies) at an add's price; the mat-muls by their
# weights, attention by its cells (a softmax's size is the cache's)


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
        type_name, repacked = split_repacked(type_name)
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
        type_name, repacked = split_repacked(type_name)
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


def split_repacked(type_name: str) -> tuple[str, bool]:
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
