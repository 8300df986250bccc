"""Tokens per second of the demo split over two local RPC servers, next to the demo all local.

    python bench/rpc_speed.py [--runs N] [--tokens N]

Starts two RPC servers lending this machine's CPU on 127.0.0.1 (as `vramchat serve-rpc` does),
then runs `vramchat demo -p ... --json` alternately without and with `--rpc` (every layer on the
two servers, split by their free memory), and prints the medians of llama.cpp's generation
speed and of the prompt's, with their ratio. On one machine the servers share its cores with
the client, so this measures the cost of the RPC path itself (every token's activations through
the loopback network and two more processes), not the gain of more hardware.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.rpc import rpc_servers  # noqa: E402

QUESTION = "Write three sentences about the history of Paris."


def _answer(tokens: int, rpc: str | None) -> dict:
    command = [sys.executable, "-m", "app", "demo", "-p", QUESTION, "-n", str(tokens), "--temp", "0", "--json"]
    command += ["--rpc", rpc] if rpc else ["--rpc", "none"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {proc.stderr[-800:]}")
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=96)
    args = parser.parse_args()
    local: list[float] = []
    split: list[float] = []
    devices: dict[str, int] = {}
    with rpc_servers(2) as endpoints:
        rpc = ",".join(str(e) for e in endpoints)
        for _ in range(args.runs):
            local.append(_answer(args.tokens, None)["tokens_per_second"])
            result = _answer(args.tokens, rpc)
            split.append(result["tokens_per_second"])
            devices = result["memory"]["allocated"]
    a, b = statistics.median(local), statistics.median(split)
    print(f"demo (Gemma 3 270M Q4_K_M), {args.tokens} tokens, greedy, {args.runs} runs of each, interleaved")
    print(f"  all local (CPU)               median {a:6.1f} tokens/s  (min {min(local):.1f}, max {max(local):.1f})")
    print(f"  over two RPC servers          median {b:6.1f} tokens/s  (min {min(split):.1f}, max {max(split):.1f})")
    print(f"  ratio: the RPC split runs at {b / a:.2f} of the local speed")
    print("  allocated per device in the split (bytes): " + ", ".join(f"{k} {v:,}" for k, v in devices.items()))


if __name__ == "__main__":
    main()
