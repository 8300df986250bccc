"""What one operation of a decode graph costs on this CPU beside what the speed probe times for it.

    python bench/op_chain.py [--threads N]

The probe prices a graph's operations by one synchronisation each (`per_op`: a chain of adds on 16
floats, which one thread computes) and a mat-mul's extra (`small_mat_vecs`: 32 small mat-vecs of one
input). In a model's graph each operation reads what the one before wrote, across every thread: on a
CPU with many cores the rows a thread reads were written in other cores' caches. This times chains of
dependent operations as wide as a model's hidden state, with the engine's thread count, and prints
what each adds per operation against the probe's two figures.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CHAIN = 64  # operations in each chain
REPEATS = 20


def chains(threads: int, width: int) -> dict[str, float]:
    """Seconds per operation of four dependent chains `width` wide: adds, norms, q8_0 mat-vecs, and the three
    in turn (a layer's pattern)."""
    from app.speed.probe import TYPE_IDS, _Probe

    probe = _Probe(threads)
    g = probe.ggml
    f32, q8_0 = TYPE_IDS["f32"], TYPE_IDS["q8_0"]
    row = g.ggml_row_size(q8_0, width)
    out: dict[str, float] = {}
    for kind in ("add", "rms_norm", "mat_vec", "layer"):
        ctx = probe._context(width * row + CHAIN * width * 16 + width * 64, 4 * CHAIN + 8, 8 * CHAIN)
        try:
            a = g.ggml_new_tensor_1d(ctx, f32, width)
            ctypes.memmove(g.ggml_get_data(a), probe.source, width * 4)
            w = g.ggml_new_tensor_2d(ctx, q8_0, width, width)  # one matrix, in cache: only the input moves
            probe._fill(w, q8_0, width, width)
            x, ops = a, 0
            for step in range(CHAIN):
                if kind == "add" or (kind == "layer" and step % 3 == 0):
                    x = g.ggml_add(ctx, x, a)
                elif kind == "rms_norm" or (kind == "layer" and step % 3 == 1):
                    x = g.ggml_rms_norm(ctx, x, 1e-6)
                else:
                    x = g.ggml_mul_mat(ctx, w, x)
                ops += 1
            out[kind] = probe._time_graph(ctx, x, 8 * CHAIN, repeats=REPEATS) / ops
        finally:
            g.ggml_free(ctx)
    out["probe per_op"] = min(probe.per_op() for _ in range(3))
    out["probe small mat-vec"] = min(probe.small_mat_vecs()[0] for _ in range(3))
    out["q8_0 rate"] = probe.decode_rate("q8_0", 8 << 20) or 0.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, {args.threads} threads; chains of {CHAIN} dependent operations")
    for width in (128, 640, 2048):
        t = chains(args.threads, width)
        rate = t.pop("q8_0 rate")
        streamed = width * width * 34 / 32 / rate if rate else 0.0
        figures = ", ".join(f"{k} {v * 1e6:.2f} us" for k, v in t.items())
        print(f"width {width:>5}: {figures}; its q8_0 matrix streamed at the probe's rate {streamed * 1e6:.2f} us")


if __name__ == "__main__":
    main()
