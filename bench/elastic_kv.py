"""A context that grows with the conversation, measured: memory at load, and the cost of each growth step.

    python bench/elastic_kv.py [MODEL] [--max N] [--turns N] [--words N]

1. The demo (or MODEL) loaded for a maximum of --max tokens twice, side by side: with the context
   growing from 4,096 tokens, and fixed at the maximum. Quoted: the KV cache llama.cpp committed
   right after the load, and the engine process's RSS.
2. A scripted conversation (long pasted notes, then a question) through the app's own reply
   function, crossing growth steps; each step's time (a new context, the conversation's sequence
   state carried over), against prefilling the same tokens again in a fresh context, which is the
   alternative to carrying the state.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.args import model_parser, model_path  # noqa: E402

MiB = 1024 * 1024


def _rss(pid: int) -> int:
    import psutil

    return psutil.Process(pid).memory_info().rss


def _load(path: str, max_ctx: int, elastic: bool):
    from app.devices import probe_devices
    from app.session import ModelSession
    from planner.anatomy import load_anatomy
    from planner.config import LoadConfig
    from planner.fit import evaluate
    from planner.gguf import read_gguf

    devices = probe_devices(cpu_only=True)
    anatomy = load_anatomy(read_gguf(path))
    fit = evaluate(anatomy, LoadConfig(n_ctx=max_ctx, flash_attn=True), [], devices.host)
    session = ModelSession(elastic=elastic)
    session.load(path, anatomy, fit, devices)
    return session


def _kv(session) -> int:
    m = session.model.report.measurements
    return sum(m.kv.values()) + sum(m.kv_swa.values())


def main() -> None:
    parser = model_parser(__doc__)
    parser.add_argument("--max", type=int, default=32768, help="the plan's maximum context (default 32768)")
    parser.add_argument("--turns", type=int, default=5, help="conversation turns (default 5)")
    parser.add_argument("--words", type=int, default=100, help="notes per pasted message (default 100)")
    args = parser.parse_args()
    args.model = model_path(args.model)

    from app.conversation.reply import write_reply
    from app.conversation.templates import ChatMessage
    from app.engine import GenerationParams

    elastic, fixed = _load(args.model, args.max, True), _load(args.model, args.max, False)
    print(f"model   {Path(args.model).name}, maximum context {args.max:,} tokens, CPU")
    for name, s in (("growing", elastic), ("fixed", fixed)):
        print(
            f"{name:<8} at load: context {s.model.n_ctx:>6,} tokens, KV committed {_kv(s) / MiB:8.2f} MiB, "
            f"engine RSS {_rss(s.engine.pid) / MiB:7.1f} MiB"
        )
    fixed.close()

    history: list[ChatMessage] = []
    steps: list[tuple[int, int, float, int]] = []  # before, after, seconds, tokens carried
    params = GenerationParams(max_tokens=24, temperature=0.0)
    for n in range(args.turns):
        notes = " ".join(f"Note {n}.{i}: parcel {i * 7919 % 1000} went to shelf {i % 13}." for i in range(args.words))
        history.append(ChatMessage("user", notes + " Which shelf did parcel 7 go to?"))

        def grew(g) -> None:
            steps.append((g.before, g.after, g.seconds, elastic.engine.kv_cells_used()))

        outcome = write_reply(
            elastic,
            None,
            0,
            list(history),
            "",
            params,
            [],
            threading.Event(),
            on_fitted=lambda b: None,
            on_piece=lambda p: None,
            on_growth=grew,
        )
        history.append(ChatMessage("assistant", outcome.text))
        print(
            f"turn {n + 1}: context {elastic.model.n_ctx:>6,} tokens, {elastic.engine.kv_cells_used():,} cells "
            f"in use, KV committed {_kv(elastic) / MiB:.2f} MiB"
        )
    elastic.close()
    if not steps:
        print("no growth step: use more --turns or --words")
        return

    # the alternative to carrying the state: prefill the same tokens in a fresh context of the new size
    from app.engine.process import EngineProcess
    from planner.config import LoadConfig

    engine = EngineProcess()
    refill: list[float] = []
    filler = engine.load(args.model, LoadConfig(n_ctx=args.max, flash_attn=True))
    del filler
    tokens = engine.tokenize(" ".join(f"word{i}" for i in range(max(s[3] for s in steps) + 8)))
    for _before, _after, _seconds, carried in steps:
        start = time.perf_counter()
        for _ in engine.generate(tokens[:carried], GenerationParams(max_tokens=1, temperature=0.0)):
            pass
        refill.append(time.perf_counter() - start)
        engine.unload()
        engine.load(args.model, LoadConfig(n_ctx=args.max, flash_attn=True))
    engine.close()
    for (before, after, seconds, carried), again in zip(steps, refill):
        print(
            f"growth {before:>6,} -> {after:>6,} tokens: {seconds * 1000:7.1f} ms carrying {carried:,} cells "
            f"(prefilling them again: {again * 1000:7.1f} ms)"
        )
    times = [s[2] for s in steps]
    print(
        f"growth steps: {len(times)}, median {statistics.median(times) * 1000:.1f} ms, "
        f"largest {max(times) * 1000:.1f} ms; re-prefill median {statistics.median(refill) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
