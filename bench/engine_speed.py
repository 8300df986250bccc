"""Tokens per second through vramchat's engine process, next to llama-cpp-python's `Llama` called directly.

    python bench/engine_speed.py [MODEL] [--tokens N] [--runs N] [--ctx N]

The engine is the app's: llama.cpp in its own process (`EngineProcess`), every piece
crossing a socket. Also measured, side by side in the same run: the time from Enter to
the first token (tokenize the question, prefill, first piece back) through the engine
process and through the in-process engine the app used before, on alternating questions
so that no run reuses the previous prompt's cache.

Same model, same context settings (n_ctx, batches, flash attention, KV types,
window-sized SWA cache, threads, the CPU's extra buffer types: off on an AMX CPU, as the engine
loads; bench/direct_llama.py), greedy sampling without penalties, the same
prompt and the same number of generated tokens. Both models are loaded side by
side; runs are interleaved (the order alternates) and the medians are compared.
Speed is generation only: tokens after the first, over the time from the first
token to the last, measured the same way for both.
MODEL defaults to the demo Gemma 3 270M.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.args import model_parser, model_path  # noqa: E402
from bench.direct_llama import engine_extra_buffers, load_llama  # noqa: E402

PROMPT = "Once upon a time, in a small village at the edge of a great forest, there lived"


def run_engine(engine, tokens: list[int], n: int) -> tuple[float, int, str]:
    from app.engine import GenerationParams

    params = GenerationParams(max_tokens=n, temperature=0.0, repeat_penalty=1.0)
    first = last = 0.0
    text = []
    for piece in engine.generate(tokens, params):
        now = time.perf_counter()
        first = first or now
        last = now
        text.append(piece)
    count = engine.last_stats.generated_tokens
    return (count - 1) / (last - first) if last > first else 0.0, count, "".join(text)


def run_llama(llm, tokens: list[int], n: int) -> tuple[float, int, str]:
    first = last = 0.0
    out: list[int] = []
    for token in llm.generate(tokens, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
        now = time.perf_counter()
        first = first or now
        last = now
        out.append(token)
        if len(out) >= n:
            break
    text = llm.detokenize(out).decode("utf-8", errors="replace")
    return (len(out) - 1) / (last - first) if last > first else 0.0, len(out), text


def main() -> None:
    parser = model_parser(__doc__)
    parser.add_argument("--tokens", type=int, default=128, help="tokens generated per run (default 128)")
    parser.add_argument("--runs", type=int, default=7, help="runs of each (default 7)")
    parser.add_argument("--ctx", type=int, default=4096, help="context length (default 4096)")
    args = parser.parse_args()
    args.model = model_path(args.model)

    from app.engine.engine import Engine
    from app.engine.process import EngineProcess
    from planner.config import LoadConfig

    threads = max(1, os.cpu_count() or 2)  # what the engine uses
    config = LoadConfig(n_ctx=args.ctx, n_batch=512, n_ubatch=512, flash_attn=True, swa_full=False)
    engine = EngineProcess()
    engine.load(args.model, config)
    local = Engine()  # the in-process engine the app used before the engine process
    local.load(args.model, config)
    # the engine's choice of the CPU's extra buffer types (off on AMX CPUs: their kernels crash here)
    extra_buffers = engine_extra_buffers(config.cpu_extra_buffers)
    llm = load_llama(
        args.model,
        extra_buffers,
        n_ctx=args.ctx,
        n_batch=512,
        n_ubatch=512,
        flash_attn=True,
        swa_full=False,
        n_threads=threads,
        n_threads_batch=threads,
        n_gpu_layers=0,
        verbose=False,
    )
    tokens = llm.tokenize(PROMPT.encode(), add_bos=True)
    assert tokens == engine.tokenize(PROMPT), "the two tokenizers disagree"

    # warm up both (page in the weights, first-call costs)
    run_engine(engine, tokens, 16)
    run_engine(local, tokens, 16)
    run_llama(llm, tokens, 16)

    speeds: dict[str, list[float]] = {"engine": [], "llama": [], "local": []}
    texts: dict[str, str] = {}
    sides = ["engine", "llama", "local"]
    for i in range(args.runs):
        order = sides[i % 3 :] + sides[: i % 3]  # each side first, second and last in turn
        for side in order:
            if side == "llama":
                tps, count, text = run_llama(llm, tokens, args.tokens)
            else:
                tps, count, text = run_engine(engine if side == "engine" else local, tokens, args.tokens)
            if count != args.tokens:
                raise SystemExit(f"{side} generated {count} tokens, not {args.tokens}: pick another prompt")
            speeds[side].append(tps)
            texts[side] = text

    med_e, med_l = statistics.median(speeds["engine"]), statistics.median(speeds["llama"])
    med_o = statistics.median(speeds["local"])
    print(
        f"model   {Path(args.model).name}, n_ctx {args.ctx}, flash attention on, {threads} threads, greedy, "
        f"CPU extra buffer types {'on' if extra_buffers else 'off (an AMX CPU)'} for all three"
    )
    print(f"prompt  {len(tokens)} tokens; {args.tokens} tokens generated per run, {args.runs} interleaved runs each")
    print(f"vramchat engine      median {med_e:7.2f} tok/s  (runs: {', '.join(f'{s:.1f}' for s in speeds['engine'])})")
    print(f"llama_cpp.Llama      median {med_l:7.2f} tok/s  (runs: {', '.join(f'{s:.1f}' for s in speeds['llama'])})")
    print(
        f"in-process engine    median {med_o:7.2f} tok/s  (runs: {', '.join(f'{s:.1f}' for s in speeds['local'])})"
        "  (before the engine process)"
    )
    print(f"ratio   engine process / Llama = {med_e / med_l:.3f}; in-process engine / Llama = {med_o / med_l:.3f}")
    print(f"same text: {texts['engine'] == texts['llama']}")

    # Enter to first token: the engine process against the in-process engine the app used before
    firsts: dict[str, list[float]] = {"process": [], "in-process": []}
    for i in range(args.runs * 2):
        question = QUESTIONS[i % len(QUESTIONS)]
        for side in ("process", "in-process") if i % 2 == 0 else ("in-process", "process"):
            firsts[side].append(first_token(engine if side == "process" else local, question))
    med_p, med_i = statistics.median(firsts["process"]), statistics.median(firsts["in-process"])
    print(
        f"Enter to first token (tokenize + prefill + first piece, {len(firsts['process'])} runs each, "
        "alternating questions):"
    )
    print(f"engine process       median {med_p * 1000:7.1f} ms")
    print(f"in-process engine    median {med_i * 1000:7.1f} ms   (before the engine process)")
    local.unload()
    engine.unload()


QUESTIONS = ("Q: What is the capital of France?\nA:", "Q: Name a large animal that lives in the sea.\nA:")


def first_token(engine, question: str) -> float:
    from app.engine import GenerationParams

    start = time.perf_counter()
    tokens = engine.tokenize(question)
    stream = engine.generate(tokens, GenerationParams(max_tokens=4, temperature=0.0))
    next(stream, None)
    elapsed = time.perf_counter() - start
    for _ in stream:
        pass
    return elapsed


if __name__ == "__main__":
    main()
