"""Tokens per second of a reply held to a JSON schema: the grammar checking the drawn token (vramchat's sampler,
as llama.cpp's server samples) beside the grammar masking the whole vocabulary first, every token.

    python bench/json_reply.py [MODEL] [--runs N] [--tokens N]

One engine (in this process), one model, one prompt and schema; greedy, so both samplers write the same reply
(checked); the two interleaved, the order alternating. Speed is the reply's tokens over its time from the
request to its last token, prompt included (the prompt is read from the cache after the first run). Printed:
the medians, their ratio, how many of the reply's tokens the grammar refused when drawn first, and a reply
without a grammar for scale, interleaved with them (its own text, as long). MODEL defaults
to the demo Gemma 3 270M, whose 262,144-token vocabulary is the costly case.
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

PROMPT = "Q: Describe Ann, her age, her city and her friends as JSON.\nA:"
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "city": {"type": "string"},
        "friends": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age", "city", "friends"],
}


def main() -> None:
    parser = model_parser(__doc__)
    parser.add_argument("--runs", type=int, default=7, help="runs of each (default 7)")
    parser.add_argument("--tokens", type=int, default=80, help="at most this many tokens a reply (default 80)")
    args = parser.parse_args()

    import app.engine.engine as engine_module
    from app.engine.engine import Engine
    from app.engine.sampler_chain import ReplySampler
    from app.engine.types import GenerationParams
    from app.serve.structured import JsonFormat, reply_grammar
    from planner.config import LoadConfig

    refused = [0]

    class GrammarFirst(ReplySampler):
        """The grammar over every token of the vocabulary before each draw."""

        def sample(self, ctx, index):  # type: ignore[no-untyped-def]
            if self._grammar is None:
                return super().sample(ctx, index)
            token = self._drawn(ctx, index, with_grammar=True)
            self._llama.llama_sampler_accept(self._grammar, token)
            self._llama.llama_sampler_accept(self.chain, token)
            return token

    class Counted(ReplySampler):
        def _allows(self, token: int) -> bool:
            allowed = super()._allows(token)
            refused[0] += not allowed
            return allowed

    engine = Engine()
    engine.load(model_path(args.model), LoadConfig(n_ctx=2048, n_gpu_layers=0, flash_attn=True))
    prompt = engine.tokenize(PROMPT)
    grammar = reply_grammar(JsonFormat(SCHEMA))
    samplers = {
        "grammar checks the draw (vramchat)": Counted,
        "grammar masks every token first": GrammarFirst,
        "no grammar (for scale)": ReplySampler,
    }

    def reply(sampler: type[ReplySampler], with_grammar: bool = True) -> tuple[float, int, str]:
        engine_module.ReplySampler = sampler  # type: ignore[misc]
        params = GenerationParams(
            max_tokens=args.tokens, temperature=0.0, repeat_penalty=1.0, grammar=grammar if with_grammar else ""
        )
        start = time.perf_counter()
        text = "".join(engine.generate(list(prompt), params))
        return time.perf_counter() - start, engine.last_stats.generated_tokens, text

    speeds: dict[str, list[float]] = {name: [] for name in samplers}
    texts: dict[str, set[str]] = {name: set() for name in samplers}
    counts: list[int] = []
    lengths: list[int] = []
    reply(Counted)  # the prompt into the cache
    for run in range(args.runs):
        order = list(samplers.items())
        order = order[run % len(order) :] + order[: run % len(order)]  # each first in turn
        for name, sampler in order:
            refused[0] = 0
            seconds, tokens, text = reply(sampler, with_grammar=sampler is not ReplySampler)
            speeds[name].append(tokens / seconds)
            texts[name].add(text)
            if sampler is Counted:
                counts.append(refused[0])
                lengths.append(tokens)
    engine.close()

    print(f"model: {model_path(args.model)}; {args.runs} runs of each, interleaved; medians; greedy")
    ours, first, free = (statistics.median(speeds[name]) for name in samplers)
    for name in samplers:
        print(f"  {name:38} {statistics.median(speeds[name]):6.1f} tokens/s")
    (text,) = texts["grammar checks the draw (vramchat)"]
    same = texts["grammar checks the draw (vramchat)"] == texts["grammar masks every token first"]
    print(
        f"ratio {ours / first:.2f}x (and {ours / free:.2f}x the reply without a grammar); drawn first, "
        f"{statistics.median(counts):.0f} of the reply's "
        f"{statistics.median(lengths):.0f} tokens were refused and drawn again; the same reply from both: "
        f"{'yes' if same else 'NO'}"
    )
    print(f"reply: {text}")


if __name__ == "__main__":
    main()
