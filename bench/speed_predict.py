"""Predicted against measured decode and prefill speed, on this CPU, side by side in one run.

    python bench/speed_predict.py [--zoo all|none|NAME,...] [--wide all|none|NAME,...] [--runs N]
                                  [--tokens N] [--probes N]

The models: the demo Gemma 3 270M, the tiny zoo models of tests/support (random weights:
their text is noise, their speed is real) and three "wide" ones (`--wide`): few layers, but a
real model's attention (8 or 32 heads 128 wide, 2 to 8 KV heads), whose KV cache at a long fill
comes from memory rather than the CPU's caches. Each is planned for this machine's CPU (as
`vramchat --plan` would, fixed to flash attention on and an f16 KV cache so that every run
is comparable), loaded in vramchat's engine process, and asked for replies at three
context fills (32 tokens, a quarter and three quarters of the context): the prompt's
prefill speed and the reply's decode speed are the engine's own figures, the ones the app
learns from. Replies use the app's default sampler chain.

The prediction is planner.speed's, from this machine's probe (app/speed/probe.py).
The machine is shared, so the probe runs `--probes` times interleaved with the demo's runs
(in a child process, as the app runs it): "first probe" is the first one taken, "best" the quietest
of them (the one whose reference figures were nearest the best any probe timed). Measured figures are medians
of `--runs` interleaved runs. The load other processes put on the CPUs during each run is
read from /proc/stat (all CPU time less this bench's and its engine's) and reported.
What /proc/stat cannot show is timed around each run by two reference kernels (a thread
synchronisation and a 32-wide head's attention, in this process): on a VM the two vCPUs
change placement for seconds at a time (a synchronisation costs 0.24 or 0.55 us here) and a
neighbour on the host slows the cores by half at times. A run either kernel found slowed is
run again with a new prompt (`--retries`), and one still slowed is left out of the medians.
A probe is held to the same rule: taken again while the kernels, or its own synchronisation, say
the machine was slowed; and once the runs are done (when the best synchronisation of the whole
run is known) a first probe whose synchronisation was above it is taken again.

Learning: the demo's first-round replies (3, one per fill) are recorded exactly as the app
records a reply (app.speed.learn_from_reply, into a private VRAMCHAT_HOME), and the learned
prediction is compared with the medians of the later rounds.

For the choice of the probe: the same table gives what the plain bandwidth model would say
(tokens/s = memory read rate / bytes per token, the read rate from numpy summing a 256 MiB
array with the engine's thread count).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

STORY = (
    "Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker "
    "who repaired every clock in the valley and told the children stories about the stars. "
)


@dataclass
class Case:
    name: str
    path: str
    n_ctx: int
    fills: list[int]
    group: str = "zoo"  # demo, zoo or wide: each summed up apart
    plan: Any = None
    cost: Any = None
    engine: Any = None
    prompts: dict[int, list[list[int]]] = field(default_factory=dict)
    decode: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # (tok/s, others' load)
    prefill: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    load: list[float] = field(default_factory=list)
    stats: dict[int, list[Any]] = field(default_factory=dict)


def _cpu_jiffies(pids: list[int]) -> tuple[int, int]:
    """(all CPUs' busy jiffies, those of `pids` and their threads)."""
    with open("/proc/stat") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    busy = sum(values) - values[3] - values[4]
    own = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                parts = handle.read().rsplit(")", 1)[1].split()
            own += int(parts[11]) + int(parts[12])
        except (OSError, IndexError, ValueError):
            pass
    return busy, own


def busy_share(seconds: float) -> float:
    """The share of the CPUs in use (by anyone) over the next `seconds`."""
    with open("/proc/stat") as handle:
        a = [int(v) for v in handle.readline().split()[1:]]
    time.sleep(seconds)
    with open("/proc/stat") as handle:
        b = [int(v) for v in handle.readline().split()[1:]]
    total = sum(b) - sum(a)
    idle = (b[3] + b[4]) - (a[3] + a[4])
    return 1 - idle / total if total else 0.0


def wait_quiet(limit: float, patience: float, waited: list[float]) -> None:
    """Wait until the CPUs stay under `limit` busy for a second, at most `patience` seconds."""
    start = time.perf_counter()
    while time.perf_counter() - start < patience:
        if busy_share(1.0) <= limit:
            break
    waited.append(time.perf_counter() - start)


def numpy_read_bandwidth(threads: int, size: int = 256 << 20) -> float:
    """Bytes/s numpy reads a large array with `threads` threads (sum of float32 chunks, best of 5)."""
    import numpy as np

    a = np.ones(size // 4, dtype=np.float32)
    chunks = np.array_split(a, threads)
    best = float("inf")
    for _ in range(5):
        workers = [threading.Thread(target=np.sum, args=(c,)) for c in chunks]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = min(best, time.perf_counter() - t0)
    return size / best


def plan_case(case: Case, host: Any) -> None:
    from planner.anatomy import load_anatomy
    from planner.fit import evaluate, fixed_config
    from planner.gguf import read_gguf
    from planner.speed import token_cost

    model = load_anatomy(read_gguf(case.path))
    config = fixed_config(model, [], n_ctx=case.n_ctx, flash_attn=True)
    case.plan = evaluate(model, config, [], host).plan
    case.cost = token_cost(case.plan)


def make_prompts(case: Case, runs: int, rng: random.Random) -> None:
    """`runs` x (1 + RETRIES) prompts per fill, no two alike beyond their first token (a repeated run takes
    the next: the engine would reuse a prompt it has cached, and time no prefill)."""
    n_vocab = case.plan.model.n_vocab
    base = case.engine.tokenize(STORY * 400)
    per_fill = runs * (RETRIES[0] + 1)
    starts = iter(rng.sample(range(0, 1000), per_fill * len(case.fills)))
    for fill in case.fills:
        prompts = []
        for _ in range(per_fill):
            if case.name == "demo":
                start = next(starts)
                tokens = [base[0]] + base[1 + start : start + fill]
            else:
                tokens = [rng.randrange(3, n_vocab) for _ in range(fill)]
            prompts.append(tokens[:fill])
        case.prompts[fill] = prompts


def _wide() -> dict[str, Any]:
    from tests.support.tiny.common import Q, TinySpec

    def spec(n_layer: int, n_embd: int, n_head: int, n_head_kv: int, n_ff: int = 2048) -> TinySpec:
        return TinySpec(
            "llama",
            n_layer=n_layer,
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=n_head_kv,
            n_ff=n_ff,
            weight_type=Q.Q4_K,
            embd_type=Q.Q6_K,
            output_type=Q.Q6_K,
            n_vocab=512,
        )

    return {
        # 16 layers of 8 heads 128 wide: little to read but a real model's KV cache per layer, from memory
        "wide-kv8": spec(16, 1024, 8, 8),
        "wide-kv2": spec(16, 1024, 8, 2),
        # a Llama 3 8B's attention (32 heads, 8 KV heads, 128 wide) in 8 layers
        "wide-32x8": spec(8, 4096, 32, 8, n_ff=1024),
    }


WIDE = _wide()
WAITED: list[float] = []
PATIENCE = [30.0]
RETRIES = [2]
# a run counts as disturbed when a reference kernel timed just before or after it ran this much slower than
# its best: a thread synchronisation (this VM's two vCPUs switch between placements where it costs 0.24 and
# 0.55 us, seconds at a time) or a 32-wide head's attention (slowed by half at times while no process here
# runs: a neighbour on the host). /proc/stat shows neither.
SYNC_SLOWER, COMPUTE_SLOWER = 1.5, 1.2


class MachineState:
    """The machine's speed at a moment, from two short reference kernels of the probe, run in this process."""

    def __init__(self, threads: int) -> None:
        from app.speed.probe import _Probe

        self.probe = _Probe(threads)
        self.best_sync, self.best_compute = float("inf"), float("inf")
        self.disturbed_runs, self.retries = 0, 0
        self.probe_retries, self.late_probes = 0, 0  # probes taken again: at once, and after the runs
        self.best_probe_attention = float("inf")  # the probe's own 32-wide token attention (its 4,096 cells)
        for _ in range(20):  # a baseline: the best of a few seconds' samples
            self.slowed()
            self.best_probe_attention = min(
                self.best_probe_attention, self.probe.attention_seconds(32, masked=True) or float("inf")
            )
            time.sleep(0.1)

    def slowed(self) -> bool:
        sync = self.probe.per_op()
        compute = self.probe.attention_seconds(32, cells=1024, masked=True) or float("inf")
        self.best_sync, self.best_compute = min(self.best_sync, sync), min(self.best_compute, compute)
        return sync > SYNC_SLOWER * self.best_sync or compute > COMPUTE_SLOWER * self.best_compute


STATE: list[MachineState] = []


def run_once(case: Case, fill: int, index: int, tokens: int) -> None:
    """One reply, measured; run again (up to RETRIES times) while the reference kernels say the machine
    was slowed around it. The last try is kept either way, flagged: a disturbed run is left out of the
    medians like one under others' load."""
    for attempt in range(RETRIES[0] + 1):
        slowed = STATE[0].slowed() if STATE else False
        prompt = case.prompts[fill][index * (RETRIES[0] + 1) + attempt]
        disturbed = _run(case, fill, prompt, index, tokens, slowed, last=attempt == RETRIES[0])
        if not disturbed:
            return
        if STATE:
            STATE[0].retries += attempt < RETRIES[0]


ENGINES_AT_ONCE = 8  # tiny models' engine processes loaded side by side (each a few tens of MiB)


def run_side_by_side(group: list[Case], runs: int, tokens: int, rng: random.Random) -> None:
    """Load every model of `group` in its own engine, then take their runs round-robin: run 1 of each
    model's fills, then run 2, and so on. A model this build cannot run is said and left out."""
    from app.engine.process import EngineProcess

    live: list[Case] = []
    try:
        for case in group:
            case.engine = EngineProcess()
            try:
                case.engine.load(case.path, case.plan.config)
                make_prompts(case, runs, rng)
                live.append(case)
            except Exception as exc:  # a model this build cannot run: say so, go on
                print(f"{case.name}: skipped ({type(exc).__name__}: {exc})", flush=True)
                case.engine.close()
        for index in range(runs):
            for case in list(live):
                try:
                    for fill in case.fills if index % 2 == 0 else reversed(case.fills):
                        run_once(case, fill, index, tokens)
                except Exception as exc:
                    print(f"{case.name}: stopped ({type(exc).__name__}: {exc})", flush=True)
                    case.decode.clear()
                    live.remove(case)
            print(f"{', '.join(c.name for c in group)}: round {index + 1}/{runs} done", flush=True)
    finally:
        for case in group:
            if case.engine is not None:
                case.engine.close()


def probe_slowed(data: dict[str, Any]) -> bool:
    """Whether a probe's own thread synchronisation, or its 32-wide attention, says the VM was slowed
    throughout its rounds (the probe times the same kernels as the reference, in its child process)."""
    if not STATE:
        return False
    state = STATE[0]
    attention = float((data.get("attention_seconds") or {}).get("32", 0.0))
    return (
        float(data.get("op_seconds", 0.0)) > SYNC_SLOWER * state.best_sync
        or attention > COMPUTE_SLOWER * state.best_probe_attention
    )


def probe_while_unslowed() -> dict[str, Any]:
    """The probe as the app runs it, taken again (up to RETRIES times) while the reference kernels, or its
    own synchronisation, say the machine was slowed around it."""
    from app.speed.machine import run_probe

    for attempt in range(RETRIES[0] + 1):
        wait_quiet(0.10, PATIENCE[0], WAITED)
        slowed = STATE[0].slowed() if STATE else False
        data = run_probe(full=True)
        slowed = (STATE[0].slowed() if STATE else False) or slowed or probe_slowed(data)
        if not slowed or attempt == RETRIES[0]:
            break
        STATE[0].probe_retries += 1
    return data


def _run(case: Case, fill: int, prompt: list[int], index: int, tokens: int, slowed_before: bool, last: bool) -> bool:
    from app.engine import GenerationParams

    wait_quiet(0.10, PATIENCE[0], WAITED)
    params = GenerationParams(max_tokens=tokens, temperature=0.7, seed=index + 1)
    pids = [os.getpid()] + ([case.engine.pid] if case.engine.pid else [])
    busy0, own0 = _cpu_jiffies(pids)
    t0 = time.perf_counter()
    for _ in case.engine.generate(prompt, params):
        pass
    elapsed = time.perf_counter() - t0
    busy1, own1 = _cpu_jiffies(pids)
    disturbed = slowed_before or (STATE[0].slowed() if STATE else False)
    if disturbed and not last:
        return True
    hz = os.sysconf("SC_CLK_TCK")
    others = max(0.0, ((busy1 - busy0) - (own1 - own0)) / hz / max(elapsed, 1e-6) / (os.cpu_count() or 1))
    stats = case.engine.last_stats
    case.load.append(others)
    case.stats.setdefault(fill, []).append(stats)
    judged = max(others, DISTURBED_LOAD) if disturbed else others
    if disturbed and STATE:
        STATE[0].disturbed_runs += 1
    if stats.generated_tokens >= 16:
        case.decode.setdefault(fill, []).append((stats.tokens_per_second, judged))
    case.prefill.setdefault(fill, []).append((stats.prompt_tokens_per_second, judged))
    return disturbed


DISTURBED_LOAD = 1.0  # a disturbed run is judged as one under full load by others (quiet_median leaves it out)


def quiet_median(runs: list[tuple[float, float]], limit: float) -> tuple[float, int, int]:
    """The median of the runs other processes left alone (all of them when none was): (median, used, of)."""
    quiet = [v for v, load in runs if load <= limit]
    chosen = quiet or [v for v, _ in runs]
    return statistics.median(chosen), len(quiet) if quiet else len(runs), len(runs)


def predictions(case: Case, first: Any, best: Any) -> dict[int, dict[str, float]]:
    from planner.speed import predicted_decode, predicted_prefill

    out = {}
    for fill in case.fills:
        gen = statistics.median(s.generated_tokens for s in case.stats[fill]) if case.stats.get(fill) else 0
        at = int(fill + gen // 2)
        out[fill] = {
            "decode_first": predicted_decode(case.cost, at, first, {}) or 0.0,
            "decode_best": predicted_decode(case.cost, at, best, {}) or 0.0,
            "prefill_first": predicted_prefill(case.cost, fill, 0, first) or 0.0,
            "prefill_best": predicted_prefill(case.cost, fill, 0, best) or 0.0,
        }
    return out


def dump(path: Path, probes: list[dict[str, Any]], quietest: dict[str, Any], cases: list[Case]) -> None:
    """The run's raw figures as JSON: what `--dump` writes."""
    models = [
        {
            "name": case.name,
            "group": case.group,
            "n_ctx": case.n_ctx,
            "cost": case.cost.to_json(),
            "decode": {str(fill): runs for fill, runs in case.decode.items()},
            "prefill": {str(fill): runs for fill, runs in case.prefill.items()},
            "generated": {str(fill): [s.generated_tokens for s in stats] for fill, stats in case.stats.items()},
        }
        for case in cases
    ]
    data = {"cpus": os.cpu_count(), "probes": probes, "quietest": quietest, "models": models}
    path.write_text(json.dumps(data, indent=1))


def learn(case: Case, rounds: int) -> None:
    """Record the first `rounds` rounds of replies as the app does (app.speed.learn_from_reply)."""
    from app.devices.probes import DeviceReport
    from app.speed import learn_from_reply

    @dataclass
    class Loaded:
        path: str
        now: Any

    class Session:
        def __init__(self) -> None:
            self.model = Loaded(case.path, case.plan)
            self.devices = DeviceReport([], None, [])  # type: ignore[arg-type]

    session = Session()
    for index in range(rounds):
        for fill in case.fills:
            learn_from_reply(session, case.stats[fill][index])


def learned_decode(case: Case) -> dict[int, float]:
    from app.speed import file_speed
    from app.speed.learn import config_key, devices_key
    from planner.speed import predicted_decode

    base = file_speed(case.cost, case.path, devices_key(case.plan), config_key(case.plan), [])
    factor = (base.decode_start.value or 0.0) / (base.raw_decode_start or 1.0)
    out = {}
    from app.speed.machine import cpu_speed

    cpu, _ = cpu_speed()
    for fill in case.fills:
        gen = statistics.median(s.generated_tokens for s in case.stats[fill])
        out[fill] = (predicted_decode(case.cost, int(fill + gen // 2), cpu, {}) or 0.0) * factor
    return out


def quietest(probes: list[dict[str, Any]]) -> dict[str, Any]:
    """The probe taken in the quietest moment: the one whose synchronisation, 32-wide attention and q8_0
    mat-vec were nearest the best any probe timed. A whole probe, never figures mixed from several: some
    come in pairs (the rows' latency and the streaming rate are one fit), and mixed they made the demo's
    decode read 17-45% fast where each probe alone was within 4% of the others."""

    def figures(data: dict[str, Any]) -> tuple[float, float, float]:
        attention = float((data.get("attention_seconds") or {}).get("32") or float("inf"))
        rate = float((data.get("decode_rates") or {}).get("q8_0") or 0.0)
        return float(data.get("op_seconds") or float("inf")), attention, 1.0 / rate if rate else float("inf")

    timed = [figures(data) for data in probes]
    bests = [min(column) for column in zip(*timed, strict=True)]
    scores = [sum(value / low for value, low in zip(row, bests, strict=True) if low > 0) for row in timed]
    return probes[scores.index(min(scores))]


def pct(pred: float, meas: float) -> str:
    return f"{(pred / meas - 1) * 100:+.0f}%" if meas else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default="all", help="zoo models: all, none, or names separated by commas")
    parser.add_argument(
        "--wide", default="all", help=f"models of a real model's attention: all, none, or some of {', '.join(WIDE)}"
    )
    parser.add_argument("--runs", type=int, default=5, help="the demo's replies per fill (default 5)")
    parser.add_argument("--zoo-runs", type=int, default=3, help="each zoo model's replies per fill (default 3)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per reply of the demo (default 64)")
    parser.add_argument(
        "--zoo-tokens",
        type=int,
        default=256,
        help="tokens per reply of a zoo model (default 256: a tiny model's reply takes milliseconds, and the "
        "first tokens after an idle second run slower, by 1-2 ms a reply here)",
    )
    parser.add_argument("--probes", type=int, default=5, help="probe runs interleaved with the demo's (default 5)")
    parser.add_argument("--demo-ctx", type=int, default=8192, help="the demo's context (default 8192)")
    parser.add_argument(
        "--demo",
        default=None,
        help="the demo's file (default: the Gemma 3 270M package); on a machine without it, its header clone "
        "written with noise: python -m tests.support.header_clone write .gpu/demo-header.json.gz OUT --noise",
    )
    parser.add_argument(
        "--patience",
        type=float,
        default=30.0,
        help="before each run, wait up to this many seconds for the CPUs to be quiet (default 30; 0: never)",
    )
    parser.add_argument(
        "--quiet",
        type=float,
        default=0.10,
        help="runs during which other processes used more of the CPUs are "
        "left out of the medians (default 0.10; all are kept where none was quieter)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=2,
        help="run a reply again up to this many times while reference kernels say the machine was slowed around "
        "it (default 2; -1: no reference kernels, every run kept as measured)",
    )
    parser.add_argument(
        "--dump",
        default=None,
        help="write the probes and every run's figures, with each model's token cost, to this JSON file (to "
        "price them again with another speed model, on another machine)",
    )
    args = parser.parse_args()

    PATIENCE[0] = args.patience
    home = tempfile.mkdtemp(prefix="vramchat-speed-bench-")
    os.environ["VRAMCHAT_HOME"] = home  # learning and the probe's cache stay out of the user's folders

    from app.devices import probe_devices
    from app.engine.process import EngineProcess
    from bench.args import model_path
    from planner.archs import not_for_chat
    from planner.speed import CpuSpeed
    from tests.support.tiny import ZOO, write_tiny_model

    host = probe_devices().host
    threads = max(1, os.cpu_count() or 1)
    rng = random.Random(7)
    cases = [
        Case("demo", model_path(args.demo), args.demo_ctx, [32, args.demo_ctx // 4, 3 * args.demo_ctx // 4], "demo")
    ]
    names = [] if args.zoo == "none" else list(ZOO) if args.zoo == "all" else args.zoo.split(",")
    zoo_dir = Path(home) / "zoo"
    zoo_dir.mkdir()
    for name in names:
        if not_for_chat(ZOO[name].arch):
            continue
        path = write_tiny_model(zoo_dir / f"{name}.gguf", ZOO[name])
        cases.append(Case(name, str(path), 4096, [32, 1024, 3072]))
    for name in [] if args.wide == "none" else list(WIDE) if args.wide == "all" else args.wide.split(","):
        path = write_tiny_model(zoo_dir / f"{name}.gguf", WIDE[name])
        cases.append(Case(name, str(path), 4096, [32, 1024, 3072], "wide"))

    RETRIES[0] = max(args.retries, 0)
    if args.retries >= 0:
        STATE.append(MachineState(threads))
    probes: list[dict[str, Any]] = []

    def probe() -> CpuSpeed:
        data = probe_while_unslowed()
        probes.append(data)
        if STATE:
            timed = float((data.get("attention_seconds") or {}).get("32") or "inf")
            STATE[0].best_probe_attention = min(STATE[0].best_probe_attention, timed)
        return CpuSpeed.from_json(dict(data, source="bench"))

    cpus = [probe()]
    numpy_bw = numpy_read_bandwidth(threads)

    demo = cases[0]
    started = time.perf_counter()
    for case in cases:
        plan_case(case, host)
    # the demo: rounds interleaved with probes; one engine for the whole run
    demo.engine = EngineProcess()
    demo.engine.load(demo.path, demo.plan.config)
    make_prompts(demo, args.runs, rng)
    for index in range(args.runs):
        for fill in demo.fills if index % 2 == 0 else reversed(demo.fills):
            run_once(demo, fill, index, args.tokens)
        if len(cpus) < args.probes:
            cpus.append(probe())
        print(f"demo round {index + 1}/{args.runs} done", flush=True)
    demo.engine.close()
    # the zoo and the wide models: up to ENGINES_AT_ONCE loaded side by side, their runs taken round-robin, so
    # that each model's runs spread over minutes: the VM's speed drifts by a fifth or more over minutes, and a
    # model whose runs all fell in one slow spell read 20-70% slower than its plan (one model at a time before)
    others = cases[1:]
    for at in range(0, len(others), ENGINES_AT_ONCE):
        run_side_by_side(others[at : at + ENGINES_AT_ONCE], args.zoo_runs, args.zoo_tokens, rng)

    # the reference kernels' best is known only now: a first probe taken while the VM was slowed (its sync
    # or attention above the best the whole run saw) is taken again, as a run would be
    while STATE and probe_slowed(probes[0]) and STATE[0].late_probes < RETRIES[0]:
        STATE[0].late_probes += 1
        probes[0] = probe_while_unslowed()
        cpus[0] = CpuSpeed.from_json(dict(probes[0], source="bench"))

    # the app's figures in the bench's home, to learn against: the quietest probe (app/speed/trust.py would
    # drop one taken under load)
    from app.caches.files import write_atomically
    from app.speed.machine import MACHINE_FILE, machine_key, speed_folder

    merged = quietest(probes)
    kept = {"key": machine_key(), "figures": merged}
    write_atomically(speed_folder() / MACHINE_FILE, json.dumps(kept).encode(), keep=16)
    # learning: the demo's first round (3 replies) recorded as the app records them
    learn(demo, 1)
    learned = learned_decode(demo)

    best = CpuSpeed.from_json(dict(merged, source="bench"))
    first = cpus[0]
    print()
    print(f"Machine: {os.cpu_count()} CPUs, {threads} engine threads; numpy read {numpy_bw / 1e9:.1f} GB/s")
    for label, c, data in (("first probe", first, probes[0]), (f"quietest of {len(probes)}", best, merged)):
        att = ", ".join(
            f"{w}: {v * 1e9:.0f} ns" for w, v in sorted(c.attention_seconds.items(), key=lambda x: int(x[0]))
        )
        print(
            f"{label:<13} q8_0 {c.decode_rates.get('q8_0', 0) / 1e9:.1f} GB/s in cache, x{c.large_factor:.2f} beyond; "
            f"q4_K {c.decode_rates.get('q4_K', 0) / 1e9:.1f}; op {c.op_seconds * 1e6:.2f} us; attention a cell-head "
            f"({att}); f32 read {c.read_bandwidth / 1e9:.1f} GB/s; sampler {c.sampler_entry_seconds * 1e9:.1f} ns an "
            f"entry; others' load {(data.get('load') or 0) * 100:.0f}%"
        )
    from app.speed.trust import distrust

    for index, data in enumerate(probes, start=1):
        print(f"probe {index}: {distrust(data) or 'trusted (the app would keep it)'}")
    if args.dump:
        dump(Path(args.dump), probes, merged, cases)
    print()
    header = (
        f"{'model':<18}{'fill':>6} {'decode':>8} {'(best)':>8} {'measured':>9} {'runs':>5} {'err':>6} {'(best)':>6} "
        f"{'bw-only':>8} {'err':>6}  {'prefill':>8} {'measured':>9} {'err':>6}"
    )
    print(header)
    print("-" * len(header))
    rows: list[tuple[Any, ...]] = []
    for case in cases:
        if not case.decode:
            continue
        preds = predictions(case, first, best)
        for fill in case.fills:
            if not case.decode.get(fill):
                continue
            meas, used, of = quiet_median(case.decode[fill], args.quiet)
            pre, _, _ = quiet_median(case.prefill[fill], args.quiet)
            p = preds[fill]
            gen = statistics.median(s.generated_tokens for s in case.stats[fill])
            cells = case.cost.cells_at(int(fill + gen // 2))
            nbytes = sum(d.weight_bytes() + d.kv_bytes(*cells) for d in case.cost.devices)
            naive = numpy_bw / nbytes
            fastest = (max(v for v, _ in case.decode[fill]), max(v for v, _ in case.prefill[fill]))
            rows.append(
                (
                    case.name,
                    fill,
                    p["decode_first"],
                    p["decode_best"],
                    meas,
                    naive,
                    p["prefill_best"],
                    pre,
                    *fastest,
                    p["prefill_first"],
                )
            )
            print(
                f"{case.name:<18}{fill:>6} {p['decode_first']:>8.1f} {p['decode_best']:>8.1f} {meas:>9.1f} "
                f"{used:>2}/{of:<2} {pct(p['decode_first'], meas):>6} {pct(p['decode_best'], meas):>6} "
                f"{naive:>8.1f} {pct(naive, meas):>6}  {p['prefill_best']:>8.0f} {pre:>9.0f} "
                f"{pct(p['prefill_best'], pre):>6}"
            )
    print()
    later = {}
    for fill in demo.fills:
        if len(demo.decode.get(fill, [])) > 1:
            later[fill] = quiet_median(demo.decode[fill][1:], args.quiet)[0]
    print("Demo after learning from its first 3 replies (one per fill), against the later rounds' medians:")
    for fill in demo.fills:
        if fill in later:
            got, meas = learned[fill], later[fill]
            print(f"  fill {fill:>5}: learned {got:.1f} tok/s, measured {meas:.1f}: {pct(got, meas)}")

    group = {case.name: case.group for case in cases}

    def errors(label: str, predicted: int, measured: int, only: str) -> None:
        errs = [abs(r[predicted] / r[measured] - 1) for r in rows if r[measured] and group[r[0]] == only]
        if errs:
            print(f"  {label:<40} median {statistics.median(errs) * 100:3.0f}%, max {max(errs) * 100:3.0f}%")

    # (heading, lines): each line a label, the row's predicted and measured columns, and the model group
    FIRST, BEST, MEASURED, NAIVE, FASTEST = 2, 3, 4, 5, 8  # the rows' columns
    tables: list[tuple[str, list[tuple[str, int, int, str]]]] = [
        (
            "Decode error |predicted / measured - 1|:",
            [
                ("demo, first probe", FIRST, MEASURED, "demo"),
                ("demo, the quietest probe", BEST, MEASURED, "demo"),
                ("zoo, first probe", FIRST, MEASURED, "zoo"),
                ("zoo, the quietest probe", BEST, MEASURED, "zoo"),
                ("wide, first probe", FIRST, MEASURED, "wide"),
                ("demo, bandwidth alone (numpy read)", NAIVE, MEASURED, "demo"),
                ("zoo, bandwidth alone (numpy read)", NAIVE, MEASURED, "zoo"),
            ],
        ),
        (
            "Prefill error |predicted / measured - 1|, against the runs' median:",
            [
                ("demo, first probe", 10, 7, "demo"),
                ("zoo, first probe", 10, 7, "zoo"),
                ("demo, the quietest probe", 6, 7, "demo"),
                ("zoo, the quietest probe", 6, 7, "zoo"),
                ("wide, first probe", 10, 7, "wide"),
            ],
        ),
        (
            "Against each fill's fastest run (load only ever slows a run: the least disturbed one):",
            [
                ("decode, demo", BEST, FASTEST, "demo"),
                ("decode, zoo", BEST, FASTEST, "zoo"),
                ("decode, wide", BEST, FASTEST, "wide"),
                ("prefill, demo", 6, 9, "demo"),
                ("prefill, zoo", 6, 9, "zoo"),
            ],
        ),
    ]
    print()
    for index, (heading, lines) in enumerate(tables):
        print(heading)
        for line in lines:
            errors(*line)
        if index == 0:
            for kind in ("zoo", "wide"):
                names = sorted({r[0] for r in rows if group[r[0]] == kind})
                if names:
                    print(f"  ({len(names)} {kind} models: {', '.join(names)})")
    loads = [x for c in cases for x in c.load]
    quiet = sum(1 for x in loads if x <= args.quiet)
    print(
        f"Others' load on the CPUs during the runs: median {statistics.median(loads) * 100:.0f}%, "
        f"max {max(loads) * 100:.0f}%; {quiet} of {len(loads)} runs under {args.quiet * 100:.0f}%; "
        f"whole run {time.perf_counter() - started:.0f} s, of which {sum(WAITED):.0f} s waiting for quiet CPUs"
    )
    if STATE:
        st = STATE[0]
        print(
            f"Reference kernels (sync best {st.best_sync * 1e6:.2f} us, "
            f"a 32-wide cell {st.best_compute * 1e9:.1f} ns, {st.best_probe_attention * 1e9:.1f} over the probe's "
            "cells): "
            f"{st.retries} runs repeated because the machine ran slowed around them; {st.disturbed_runs} kept "
            "disturbed after the last try (left out of the medians where a quiet run exists); "
            f"{st.probe_retries} probes taken again at once and {st.late_probes} after the runs (the first "
            "probe's sync or attention above the run's best)"
        )


if __name__ == "__main__":
    main()
