"""A long fuzz run of the GGUF reader and planner over mutated real headers.

    python bench/fuzz_gguf.py [--cases 20000] [--seed 0]

Mutates the headers of tiny models of every family (extreme integers, flipped
bytes, truncation, spliced chunks; one to three mutations per case) and checks
that each case ends in a plan or one clear error. Prints the outcome counts,
the peak memory of reading a header, the slowest case, and any crash.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.fuzzing import header_length, mutate, run_case  # noqa: E402
from tests.support.tiny import ZOO, write_tiny_model  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="vramchat-fuzz-") as tmp:
        seeds = {}
        for name, spec in ZOO.items():
            data = write_tiny_model(Path(tmp) / f"{name}.gguf", spec).read_bytes()
            seeds[name] = (data, header_length(data))
        target = Path(tmp) / "case.gguf"
        kinds: collections.Counter[str] = collections.Counter()
        errors: collections.Counter[str] = collections.Counter()
        crashes: list[str] = []
        read_peak = plan_peak = 0
        slowest = (0.0, "")
        for i in range(args.cases):
            name = rng.choice(sorted(seeds))
            data, header_end = seeds[name]
            how = []
            for _ in range(rng.randint(1, 3)):
                data, what = mutate(data, rng, header_end)
                how.append(what)
            target.write_bytes(data)
            outcome = run_case(str(target))
            kinds[outcome.kind] += 1
            read_peak = max(read_peak, outcome.peak_bytes)
            plan_peak = max(plan_peak, outcome.plan_peak_bytes)
            if outcome.seconds > slowest[0]:
                slowest = (outcome.seconds, f"{name}: {'; '.join(how)}")
            if outcome.kind == "error":
                errors[outcome.detail.split(": ", 1)[-1].split(" ")[0:3].__str__()] += 1
            if outcome.kind == "crash":
                crashes.append(f"case {i} ({name}: {'; '.join(how)}): {outcome.detail}")
            if (i + 1) % 2000 == 0:
                print(f"  {i + 1} cases, {dict(kinds)}", flush=True)
    print(f"cases: {args.cases} (seed {args.seed}) in {time.time() - started:.0f} s")
    print(f"outcomes: plan {kinds['plan']}, clear error {kinds['error']}, crash {kinds['crash']}")
    print(f"peak memory reading a header: {read_peak / 2**20:.2f} MiB; planning one: {plan_peak / 2**20:.2f} MiB")
    print(f"slowest case: {slowest[0] * 1000:.0f} ms ({slowest[1]})")
    for crash in crashes[:20]:
        print("CRASH", crash)
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
