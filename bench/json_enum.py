"""Tokens per second of a JSON reply whose schema holds a long `enum`: its values written as a trie (vramchat's
grammar) beside the same values written side by side, one alternative each.

    python bench/json_enum.py [MODEL] [--values N ...] [--runs N]

llama.cpp's grammar sampler follows every alternative still open; side by side, an enum of N values is N of them
at each token. One engine (in this process), greedy; for each N the two grammars interleaved, the order
alternating; speed is the reply's time over its tokens, and the replies each wrote are printed (the two
grammars accept the same texts: tests/serve/test_structured_replies.py asks llama.cpp's grammar sampler).
MODEL defaults to the demo Gemma 3 270M.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.args import model_parser, model_path  # noqa: E402

PROMPT = "Q: Name a country, as JSON.\nA:"


def main() -> None:
    parser = model_parser(__doc__)
    parser.add_argument("--values", type=int, nargs="+", default=[20, 200, 1000], help="enum sizes (20 200 1000)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each (default 5)")
    args = parser.parse_args()

    from app.engine.engine import Engine
    from app.engine.types import GenerationParams
    from app.serve.grammar import literal
    from app.serve.structured import JsonFormat, reply_grammar
    from planner.config import LoadConfig

    engine = Engine()
    engine.load(model_path(args.model), LoadConfig(n_ctx=2048, n_gpu_layers=0, flash_attn=True))
    prompt = engine.tokenize(PROMPT)

    def reply(grammar: str) -> tuple[float, int, str]:
        params = GenerationParams(max_tokens=40, temperature=0.0, repeat_penalty=1.0, grammar=grammar)
        start = time.perf_counter()
        text = "".join(engine.generate(list(prompt), params))
        return time.perf_counter() - start, engine.last_stats.generated_tokens, text

    print(f"model: {model_path(args.model)}; {args.runs} runs of each, interleaved; medians; greedy")
    for n in args.values:
        values = [f"Country{i}" for i in range(n)]
        schema = {"type": "object", "properties": {"c": {"enum": values}}, "required": ["c"]}
        trie = reply_grammar(JsonFormat(schema))
        flat = "reply-c ::= " + " | ".join(literal(json.dumps(v)) for v in values)
        side_by_side = "\n".join(flat if line.startswith("reply-c ::=") else line for line in trie.split("\n"))
        kinds = {"trie (vramchat)": trie, "side by side": side_by_side}
        seconds: dict[str, list[float]] = {k: [] for k in kinds}
        replies: dict[str, set[str]] = {k: set() for k in kinds}
        reply(trie)  # the prompt into the cache
        for run in range(args.runs):
            order = list(kinds.items()) if run % 2 == 0 else list(reversed(kinds.items()))
            for name, grammar in order:
                took, tokens, text = reply(grammar)
                seconds[name].append(took / max(tokens, 1))
                replies[name].add(text)
        names = list(kinds)
        fast, slow = (statistics.median(seconds[k]) for k in names)
        print(f"  {n:5} values: trie {1 / fast:6.1f} tokens/s, side by side {1 / slow:6.1f} ({slow / fast:.1f}x)")
        print(f"         replies: trie {sorted(replies[names[0]])}, side by side {sorted(replies[names[1]])}")
    engine.close()


if __name__ == "__main__":
    main()
