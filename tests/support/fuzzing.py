"""Mutations of real GGUF headers, and the one question asked of each: plan, or one clear error?

Shared by the fuzz test (a bounded number of cases in CI) and `bench/fuzz_gguf.py`
(a long run). A case passes when reading, modelling and planning the mutated
file ends either in a plan or in a `PlannerError` (which the CLI prints as one
line), within a time and memory bound.
"""

from __future__ import annotations

import random
import struct
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

from planner.anatomy import load_anatomy
from planner.config import LoadConfig
from planner.errors import PlannerError
from planner.gguf import GGUFModel, read_gguf
from planner.hardware import GiB, Host
from planner.memory import plan_memory

EXTREMES = (0, 1, 2, 7, 255, 0x7FFF_FFFF, 0xFFFF_FFFF, 1 << 32, 1 << 40, (1 << 63) - 1, (1 << 64) - 1)


@dataclass
class Outcome:
    kind: str  # "plan", "error", or "crash" (anything else: a bug)
    detail: str
    seconds: float
    peak_bytes: int  # reading the header and modelling the anatomy
    plan_peak_bytes: int = 0  # pricing one configuration (graphs included)


def header_length(data: bytes) -> int:
    """Bytes before the tensor data (where mutations are interesting)."""
    from planner.gguf import _parse  # the reader's own walk finds where the data starts

    try:
        return _parse(memoryview(data), "<bytes>", len(data), 0).data_offset
    except PlannerError:
        return len(data)


def mutate(data: bytes, rng: random.Random, header_end: int) -> tuple[bytes, str]:
    """One random mutation of the header: an extreme integer, flipped bytes, or truncation."""
    buf = bytearray(data)
    end = min(max(24, header_end), len(data))
    kinds = ("u64", "u32", "flip", "truncate", "splice") if end >= 16 else ("flip", "truncate", "splice")
    kind = rng.choice(kinds) if data else "splice"
    if not data:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 32))), "random bytes"
    if kind == "u64":
        at = rng.randrange(4, end - 8)
        value = rng.choice(EXTREMES + (rng.getrandbits(64),))
        buf[at : at + 8] = struct.pack("<Q", value & ((1 << 64) - 1))
        return bytes(buf), f"u64 {value} at {at}"
    if kind == "u32":
        at = rng.randrange(4, end - 4)
        value = rng.choice(EXTREMES + (rng.getrandbits(32),)) & 0xFFFF_FFFF
        buf[at : at + 4] = struct.pack("<I", value)
        return bytes(buf), f"u32 {value} at {at}"
    if kind == "flip":
        n = rng.randint(1, 16)
        for _ in range(n):
            at = rng.randrange(0, max(end, 1))
            buf[at] = rng.getrandbits(8)
        return bytes(buf), f"{n} random bytes"
    if kind == "truncate":
        cut = rng.randrange(0, len(data))
        return bytes(buf[:cut]), f"truncated at {cut}"
    # splice: duplicate or drop a chunk of the header, shifting everything after it
    at = rng.randrange(0, max(end, 1))
    size = rng.randint(1, 64)
    if rng.random() < 0.5:
        return bytes(buf[:at] + buf[at : at + size] + buf[at:]), f"duplicated {size} bytes at {at}"
    return bytes(buf[:at] + buf[at + size :]), f"dropped {size} bytes at {at}"


def run_case(path: str, host: Host | None = None, read: Callable[[str], GGUFModel] = read_gguf) -> Outcome:
    """Read (with `read`: the local reader, or one over HTTP), model and plan one file; classify what
    happened."""
    host = host or Host(32 * GiB, 32 * GiB, frozenset({"avx2"}))
    tracemalloc.start()
    started = time.perf_counter()
    read_peak = plan_peak = 0
    try:
        model = load_anatomy(read(path))
        read_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        plan = plan_memory(model, LoadConfig(n_ctx=512, n_batch=64, n_ubatch=64), [], host)
        kind, detail = "plan", plan.verdict
    except PlannerError as exc:
        kind, detail = "error", str(exc)
    except Exception as exc:  # anything else is a bug: the user would see a traceback
        kind, detail = "crash", f"{type(exc).__name__}: {exc}"
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    if not read_peak:
        read_peak = peak
    else:
        plan_peak = peak
    return Outcome(kind, detail, time.perf_counter() - started, read_peak, plan_peak)
