"""vramchat serve beside llama-cpp-python's own server, on the same model and settings, side by side.

    python bench/serve.py --deps DIR [--model demo] [--ctx 4096] [--tokens 64] [--rounds 3] [--clients 1,2,4]
                          [--parallel 4]

DIR holds llama-cpp-python's `server` extra, installed apart from the project's environment (its FastAPI
and pydantic are not the project's):

    .venv/bin/pip install --target DIR uvicorn fastapi pydantic-settings sse-starlette \\
        'starlette-context<0.4' PyYAML

Both servers run at once, each in its own process on 127.0.0.1, loaded with the same configuration:
vramchat plans MODEL for this machine's CPU with `--ctx`, flash attention on, an f16 KV cache, the whole
context loaded at once (`--elastic off`), and `python -m llama_cpp.server` is started with that plan's
n_ctx, n_batch, n_ubatch, flash attention and this machine's thread count (its own default is half the
cores). One thing differs and cannot be aligned: llama_cpp.server has no switch for a full-size sliding-
window cache, which llama.cpp's default keeps on, so on a model with sliding-window layers (the demo) its
KV cache is larger (each sliding-window layer keeps the whole context rather than its window).

Each round asks every server the same thing, one server after the other, each round starting with the
next server (so that a slow spell of this shared machine falls on all alike), for each number of
clients: every client streams one completion of `--tokens` tokens (greedy, no repetition penalty, a
prompt that runs past the limit, so all write the same tokens; a server that writes fewer stops the
bench), and the clients start together. llama_cpp.server is told not to let a new request cut the
running one short (`--interrupt_requests False`; its default does), so that every request is answered
whole, in turn. Measured per request on the client side: time to first
token (the request sent to the first streamed text), decode tokens per second (tokens after the first
over the time after the first); per run: requests per second and all tokens per second. The table gives
medians over rounds, then the two servers paired round by round: the ratio of their speeds and the
difference of their times (the overhead a request), which a slow spell of the machine changes far less.
With --parallel N, vramchat is also run with N slots (the demo loaded with N sequences).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Once upon a time, in a small village at the edge of a great forest, there lived"


@dataclass
class One:
    ttft: float  # seconds
    tokens: int
    decode_tps: float
    seconds: float
    engine_prompt: float | None = None  # the engine's own prompt and decode seconds (vramchat's `timings`)
    engine_decode: float | None = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(port: int, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} ended before it was ready (status {proc.returncode})")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/v1/models")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.25)
    raise SystemExit(f"{what} was not ready in {timeout:.0f} s")


def stream_once(port: int, model: str, tokens: int) -> One:
    body = json.dumps(
        {
            "model": model,
            "prompt": PROMPT,
            "max_tokens": tokens,
            "temperature": 0,
            "repeat_penalty": 1.0,
            "stream": True,
            "stream_options": {"include_usage": True},  # vramchat sends several tokens a chunk: it counts them
        }
    )
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    started = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    answer = conn.getresponse()
    if answer.status != 200:
        raise RuntimeError(f"{answer.status}: {answer.read()[:300]!r}")
    first = last = 0.0
    count = 0
    pieces = 0
    engine: tuple[float, float] | None = None
    for raw in answer:
        line = raw.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        data = json.loads(line[6:])
        text = data["choices"][0]["text"] if data.get("choices") else ""
        if text:
            now = time.perf_counter()
            first = first or now
            last = now
            pieces += 1
        usage = data.get("usage")
        if usage:
            count = usage["completion_tokens"]
        timing = data.get("timings")
        if timing:
            engine = (timing["prompt_ms"] / 1000, timing["predicted_ms"] / 1000)
    ended = time.perf_counter()
    conn.close()
    count = count or pieces  # llama_cpp.server streams one token a chunk and no usage
    decode = (count - 1) / (last - first) if last > first and count > 1 else 0.0
    prompt_s, decode_s = engine if engine is not None else (None, None)
    return One(first - started, count, decode, ended - started, prompt_s, decode_s)


def run_clients(port: int, model: str, clients: int, tokens: int) -> tuple[list[One], float]:
    results: list[One] = []
    lock = threading.Lock()
    go = threading.Barrier(clients + 1)

    def client() -> None:
        go.wait()
        one = stream_once(port, model, tokens)
        with lock:
            results.append(one)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    go.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    return results, time.perf_counter() - started


def start_vramchat(model: str, ctx: int, port: int, parallel: int) -> tuple[subprocess.Popen, dict]:
    vramchat = str(Path(sys.executable).with_name("vramchat"))
    plan = subprocess.run(
        [vramchat, "--plan", model, "--cpu", "--ctx", str(ctx), "--fa", "on", "--ctk", "f16", "--json"]
        + (["--parallel", str(parallel)] if parallel > 1 else []),
        capture_output=True,
        text=True,
        check=True,
    )
    config = json.loads(plan.stdout)["config"]
    args = [vramchat, "serve", model, "--cpu", "--ctx", str(ctx), "--fa", "on", "--ctk", "f16", "--elastic", "off"]
    args += ["--port", str(port)] + (["--parallel", str(parallel)] if parallel > 1 else [])
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    return proc, config


def start_llama_server(path: str, config: dict, port: int, deps: str) -> subprocess.Popen:
    threads = str(os.cpu_count() or 2)
    args = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        path,
        "--model_alias",
        "bench",
        "--n_ctx",
        str(config["n_ctx"]),
        "--n_batch",
        str(config["n_batch"]),
        "--n_ubatch",
        str(config["n_ubatch"]),
        "--flash_attn",
        str(bool(config["flash_attn"])),
        "--n_threads",
        threads,
        "--n_threads_batch",
        threads,
        "--n_gpu_layers",
        "0",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--interrupt_requests",
        "False",  # its default lets a new request cut the running one short: here they wait their turn
    ]
    env = {**os.environ, "PYTHONPATH": deps + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)


def model_path(model: str) -> str:
    if model == "demo":
        from app.demo import demo_model_path

        return str(demo_model_path())
    return model


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--deps", required=True, help="a folder with llama-cpp-python's server extra (see above)")
    p.add_argument("--model", default="demo")
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--clients", default="1,2,4")
    p.add_argument("--parallel", type=int, default=4, help="also run vramchat with this many slots (1: not)")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    clients = [int(c) for c in args.clients.split(",")]
    path = model_path(args.model)
    servers: dict[str, tuple[subprocess.Popen, int, str]] = {}
    try:
        port = free_port()
        proc, config = start_vramchat(path, args.ctx, port, 1)
        servers["vramchat serve"] = (proc, port, "bench")
        wait_ready(port, proc, "vramchat serve")
        port = free_port()
        servers["llama_cpp.server"] = (start_llama_server(path, config, port, args.deps), port, "bench")
        wait_ready(port, servers["llama_cpp.server"][0], "llama_cpp.server")
        if args.parallel > 1:
            port = free_port()
            proc, _ = start_vramchat(path, args.ctx, port, args.parallel)
            servers[f"vramchat --parallel {args.parallel}"] = (proc, port, "bench")
            wait_ready(port, proc, "vramchat serve --parallel")
        print(
            f"config: n_ctx {config['n_ctx']}, n_batch {config['n_batch']}, n_ubatch {config['n_ubatch']}, "
            f"flash attention {'on' if config['flash_attn'] else 'off'}, {os.cpu_count()} threads; "
            f"{args.tokens} tokens a request, {args.rounds} rounds",
            file=sys.stderr,
        )
        for name, (_proc, port, model) in servers.items():  # warm up: first graphs, caches, the prompt
            stream_once(port, model if "llama" in name else "", 8)
        runs: dict[tuple[str, int], list[tuple[list[One], float]]] = {}
        names = list(servers)
        for r in range(args.rounds):
            for n in clients:
                for name in names[r % len(names) :] + names[: r % len(names)]:  # each round starts with the next
                    _proc, port, model = servers[name]
                    results, wall = run_clients(port, model if "llama" in name else "", n, args.tokens)
                    short = [o.tokens for o in results if o.tokens != args.tokens]
                    if short:
                        raise SystemExit(f"{name} wrote {short} tokens where {args.tokens} were asked: not comparable")
                    runs.setdefault((name, n), []).append((results, wall))
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
        print_table(runs, servers, clients)
    finally:
        for proc, _port, _model in servers.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _port, _model in servers.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return 0


def print_table(runs: dict, servers: dict, clients: list[int]) -> None:
    print("| server | clients | first token ms | decode tok/s a client | tok/s all | requests/s | request ms |")
    print("|---|---|---|---|---|---|---|")
    for n in clients:
        for name in servers:
            rounds = runs[(name, n)]
            ones = [one for results, _ in rounds for one in results]
            ttft = median([o.ttft * 1000 for o in ones])
            decode = median([o.decode_tps for o in ones])
            everything = median([sum(o.tokens for o in results) / wall for results, wall in rounds])
            rps = median([len(results) / wall for results, wall in rounds])
            request = median([o.seconds * 1000 for o in ones])
            print(f"| {name} | {n} | {ttft:.1f} | {decode:.1f} | {everything:.1f} | {rps:.2f} | {request:.0f} |")
    print()
    alone = [o for results, _ in runs.get(("vramchat serve", 1), []) for o in results if o.engine_prompt is not None]
    if alone:
        first = [(o.ttft - o.engine_prompt) * 1000 for o in alone]  # type: ignore[operator]
        whole = [(o.seconds - o.engine_prompt - o.engine_decode) * 1000 for o in alone]  # type: ignore[operator]
        print(
            "vramchat serve's own time, one client, beside its engine's own prompt and decode times (a slow spell "
            "slows both; the difference is the server's work): first token "
            f"{median(first):+.1f} ms [{min(first):+.1f}, {max(first):+.1f}] after the prompt was read; a whole "
            f"request {median(whole):+.1f} ms [{min(whole):+.1f}, {max(whole):+.1f}] beyond the engine's work"
        )
        print()
    print("Paired round by round (the two servers' runs of one round came one after the other, so a slow spell")
    print("of the machine falls on both): vramchat serve against llama_cpp.server, median [lowest, highest]")
    print()
    print("| clients | decode tok/s a client, ratio | tok/s all, ratio | first token, ms | request, ms |")
    print("|---|---|---|---|---|")
    for n in clients:
        ours, theirs = runs.get(("vramchat serve", n)), runs.get(("llama_cpp.server", n))
        if not ours or not theirs:
            continue
        decode, overall, first, request = [], [], [], []
        for (a, wall_a), (b, wall_b) in zip(ours, theirs):
            decode.append(median([o.decode_tps for o in a]) / max(median([o.decode_tps for o in b]), 1e-9))
            overall.append((sum(o.tokens for o in a) / wall_a) / (sum(o.tokens for o in b) / wall_b))
            first.append(median([o.ttft for o in a]) * 1000 - median([o.ttft for o in b]) * 1000)
            request.append(median([o.seconds for o in a]) * 1000 - median([o.seconds for o in b]) * 1000)

        def said(values: list[float], fmt: str) -> str:
            return f"{median(values):{fmt}} [{min(values):{fmt}}, {max(values):{fmt}}]"

        cells = [said(decode, ".3f"), said(overall, ".3f"), said(first, "+.1f"), said(request, "+.0f")]
        print(f"| {n} | {' | '.join(cells)} |")


if __name__ == "__main__":
    sys.exit(main())
