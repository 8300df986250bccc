"""What a smaller micro-batch costs: prompt reading (prefill) speed at ubatch 512, 256 and 128.

    python bench/ubatch_cost.py [MODEL] [--prompt-tokens N] [--runs N]

The solver picks a smaller micro-batch (and batch) when the compute buffer is what stops a plan
from fitting (planner.fit.UBATCH_STEPS): the buffer shrinks with the micro-batch, prompts are read
in smaller steps. This loads MODEL (default: the demo) once per micro-batch in the in-process
engine, reads the same prompt of N tokens in each, interleaved over the runs, and prints the
median prefill tok/s per micro-batch and its ratio to 512. Decode is measured too: it should not
change (one token at a time either way).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.args import model_parser, model_path  # noqa: E402

UBATCHES = (512, 256, 128)
TEXT = (
    "The history of the printing press begins with movable type in East Asia and continues through "
    "the workshops of Mainz, where metal type, oil-based ink and a screw press came together. "
)


def main() -> None:
    parser = model_parser(__doc__)
    parser.add_argument("--prompt-tokens", type=int, default=2000, help="prompt length in tokens (default 2000)")
    parser.add_argument("--runs", type=int, default=5, help="runs per micro-batch (default 5)")
    args = parser.parse_args()
    path = model_path(args.model)

    from app.engine import GenerationParams
    from app.engine.engine import Engine
    from planner.config import LoadConfig

    engines = {}
    for ub in UBATCHES:
        engine = Engine()
        engine.load(path, LoadConfig(n_ctx=4096, n_batch=ub, n_ubatch=ub, flash_attn=True))
        engines[ub] = engine
    tokens = engines[512].tokenize(TEXT * (args.prompt_tokens // 30 + 1))[: args.prompt_tokens]
    params = GenerationParams(max_tokens=16, temperature=0.0, repeat_penalty=1.0)
    prefill: dict[int, list[float]] = {ub: [] for ub in UBATCHES}
    decode: dict[int, list[float]] = {ub: [] for ub in UBATCHES}
    for run in range(args.runs):
        order = UBATCHES if run % 2 == 0 else tuple(reversed(UBATCHES))
        for ub in order:
            shift = run + 1  # a prompt that differs from the last one at its start: no cached prefix to reuse
            list(engines[ub].generate(tokens[shift:] + tokens[:shift], params))
            stats = engines[ub].last_stats
            prefill[ub].append(stats.prompt_tokens_per_second)
            decode[ub].append(stats.tokens_per_second)
    base = statistics.median(prefill[512])
    print(f"{Path(path).name}: a {len(tokens):,}-token prompt, {args.runs} runs per micro-batch, medians")
    print(f"{'ubatch':>7} {'prefill tok/s':>14} {'vs 512':>7} {'decode tok/s':>13}")
    for ub in UBATCHES:
        p = statistics.median(prefill[ub])
        print(f"{ub:>7} {p:>14.1f} {p / base:>7.2f} {statistics.median(decode[ub]):>13.1f}")


if __name__ == "__main__":
    main()
