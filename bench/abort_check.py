"""What llama.cpp's abort check costs a token: no check, the Python callback the engine used, its StopFlag.

    python bench/abort_check.py [MODEL ...] [--rounds N] [--tokens N]

ggml-cpu asks the context's abort callback after every node of a graph (thread 0, the other threads
waiting at the barrier). The engine needs one (Esc stops a long prompt mid-batch); this measures what
each way of answering it costs, in one process, one context per model, the three ways interleaved
round by round: a 32-token prompt, then `--tokens` tokens decoded one at a time. Medians over the
rounds and the ratio to no check at all. Models: the tiny zoo's llama-f16 and the demo unless named
(a tiny model's token has few nodes but little work each: where a per-node cost shows most).
"""

from __future__ import annotations

import argparse
import ctypes
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _context(path: str) -> Any:
    import llama_cpp

    from app.engine.engine import _threads
    from app.engine.params import apply_context_params, apply_model_params, ensure_backend
    from planner.config import LoadConfig

    ensure_backend()
    config = LoadConfig(n_ctx=2048, flash_attn=True)
    mparams = llama_cpp.llama_model_default_params()
    apply_model_params(mparams, config)
    model = llama_cpp.llama_model_load_from_file(path.encode(), mparams)
    if not model:
        raise SystemExit(f"llama.cpp could not load {path}")
    cparams = llama_cpp.llama_context_default_params()
    apply_context_params(cparams, config)
    cparams.n_threads = cparams.n_threads_batch = _threads()
    return model, llama_cpp.llama_init_from_model(model, cparams)


def _round(ctx: Any, n_vocab: int, tokens: int, rng: random.Random) -> tuple[float, float]:
    """Seconds of a 32-token prompt and of one decoded token (median of `tokens`)."""
    import llama_cpp

    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    prompt = (llama_cpp.llama_token * 32)(*[rng.randrange(3, n_vocab) for _ in range(32)])
    t0 = time.perf_counter()
    if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(prompt, 32)) != 0:
        raise SystemExit("llama_decode failed")
    prompt_seconds = time.perf_counter() - t0
    one = (llama_cpp.llama_token * 1)(rng.randrange(3, n_vocab))
    steps = []
    for _ in range(tokens):
        t0 = time.perf_counter()
        llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(one, 1))
        steps.append(time.perf_counter() - t0)
    return prompt_seconds, statistics.median(steps)


def measure(path: str, rounds: int, tokens: int) -> dict[str, tuple[float, float]]:
    import llama_cpp

    from app.engine.stop_flag import StopFlag

    model, ctx = _context(path)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    event = threading.Event()
    python_callback = llama_cpp.ggml_abort_callback(lambda _data: bool(event.is_set()))
    flag_callback, flag_data, in_c = StopFlag().abort_callback()
    ways: dict[str, tuple[Any, Any]] = {
        "no check": (llama_cpp.ggml_abort_callback(0), None),
        "Python callback (before)": (python_callback, ctypes.c_void_p(0)),
        f"StopFlag ({'in C' if in_c else 'Python'})": (flag_callback, flag_data),
    }
    rng = random.Random(1)
    timed: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for index in range(rounds):
        order = list(ways) if index % 2 == 0 else list(reversed(ways))
        for name in order:
            callback, data = ways[name]
            llama_cpp.llama_set_abort_callback(ctx, callback, data)
            timed[name].append(_round(ctx, n_vocab, tokens, rng))
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    return {name: (statistics.median(p for p, _ in t), statistics.median(d for _, d in t)) for name, t in timed.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=".gguf files (default: the tiny zoo's llama-f16 and the demo)")
    parser.add_argument("--rounds", type=int, default=9, help="rounds, each way once a round (default 9)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens decoded a round (default 64)")
    args = parser.parse_args()
    models = args.models
    if not models:
        from bench.args import model_path
        from tests.support.tiny import ZOO, write_tiny_model

        folder = Path(tempfile.mkdtemp(prefix="vramchat-abort-"))
        models = [str(write_tiny_model(folder / "llama-f16.gguf", ZOO["llama-f16"])), model_path(None)]
    for path in models:
        results = measure(path, args.rounds, args.tokens)
        base_prompt, base_token = results["no check"]
        print(f"\n{Path(path).name}: medians of {args.rounds} rounds")
        print(f"  {'abort check':<26}{'32-token prompt':>18}{'vs none':>9}{'a token':>14}{'vs none':>9}")
        for name, (prompt, token) in results.items():
            print(
                f"  {name:<26}{prompt * 1e3:>15.2f} ms{prompt / base_prompt:>8.2f}x"
                f"{token * 1e6:>11.1f} us{token / base_token:>8.2f}x"
            )


if __name__ == "__main__":
    main()
