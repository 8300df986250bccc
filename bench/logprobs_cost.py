"""What log-probabilities cost a reply: tokens per second with `top_logprobs` 0 and 20 beside none.

    python bench/logprobs_cost.py [MODEL] [--runs N] [--tokens N]

One engine (in this process), one prompt, greedy without penalties (the same reply each way, checked); the three
interleaved, each first in turn. Speed is the reply's tokens over its time from the request to its last token.
MODEL defaults to the demo Gemma 3 270M (a 262,144-token vocabulary: the costly case).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.args import model_parser, model_path  # noqa: E402

PROMPT = "Once upon a time, in a small village at the edge of a great forest, there lived"


def main() -> None:
    parser = model_parser(__doc__)
    parser.add_argument("--runs", type=int, default=7, help="runs of each (default 7)")
    parser.add_argument("--tokens", type=int, default=96, help="tokens a reply (default 96)")
    args = parser.parse_args()

    from app.engine.engine import Engine
    from app.engine.types import GenerationParams
    from planner.config import LoadConfig

    engine = Engine()
    engine.load(model_path(args.model), LoadConfig(n_ctx=2048, n_gpu_layers=0, flash_attn=True))
    prompt = engine.tokenize(PROMPT)
    kinds = {"no logprobs": -1, "logprobs, top 0": 0, "logprobs, top 20": 20}

    def reply(top: int) -> tuple[float, str]:
        params = GenerationParams(max_tokens=args.tokens, temperature=0.0, repeat_penalty=1.0, top_logprobs=top)
        start = time.perf_counter()
        text = "".join(engine.generate(list(prompt), params))
        return engine.last_stats.generated_tokens / (time.perf_counter() - start), text

    reply(-1)  # the prompt into the cache
    speeds: dict[str, list[float]] = {name: [] for name in kinds}
    texts: set[str] = set()
    for run in range(args.runs):
        order = list(kinds.items())
        for name, top in order[run % 3 :] + order[: run % 3]:
            speed, text = reply(top)
            speeds[name].append(speed)
            texts.add(text)
    engine.close()
    base = statistics.median(speeds["no logprobs"])
    print(f"model: {model_path(args.model)}; {args.runs} runs of each, interleaved; medians; greedy")
    for name in kinds:
        median = statistics.median(speeds[name])
        print(f"  {name:18} {median:6.1f} tokens/s  ({median / base:.2f}x)")
    print(f"the same reply each way: {'yes' if len(texts) == 1 else 'NO'}")


if __name__ == "__main__":
    main()
