"""Where a first `vramchat --plan MODEL --json` spends its wall time, phase by phase, beside the header read alone.

    python bench/plan_phases.py [MODEL] [--runs N] [--imports N]

Each run is a fresh process planning MODEL in a new home (no header, compute or replay cache; this machine's
speed probe kept, as bench/plan_speed.py's first plan). In it, the functions of each phase are wrapped as their
modules load, and every import is timed too: a phase's figure is its own time, without the phases and imports
within it, so the rows add up to the process's time after Python's start. Printed: each phase's median over
the runs, then the medians of `python -c pass` and of a process that only reads the header (bench/plan_speed.py
--floor's), all interleaved, and what 1.5x the header read would leave for everything but the read.
--imports N also lists the N modules whose own import takes longest. MODEL defaults to the demo Gemma 3 270M.
The wrappers cost a little each: the rows add up to a few ms more than a plan's own time (bench/plan_speed.py).
"""

from __future__ import annotations

import os
import sys
import time

# the timed process imports nothing else before the plan does: what it imports is the plan's to pay
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# phase -> the functions whose own time it is, as module -> names (a class's method as "Class.method")
PHASES: dict[str, dict[str, list[str]]] = {
    "replay key (the cache said again)": {"app.cli.replay": ["key_for", "replay"]},
    "command line parser": {"app.cli.parser": ["build_parser"], "argparse": ["ArgumentParser.parse_args"]},
    "device probe": {"app.devices.machine": ["probe_devices"]},
    "header read": {"planner.gguf": ["read_gguf"]},
    "anatomy from the header": {"planner.anatomy": ["load_anatomy"]},
    "graph pricing (build + allocator)": {"planner.compute": ["compute_buffers"]},
    "solver (the rest)": {"app.planning": ["plan_model"]},
    "committed context (the rest)": {"app.cli.plan": ["_committed"]},
    "speed plan": {"app.speed": ["plan_speed"]},
    "caches written": {"app.cli.replay": ["keep"], "app.caches.headers": ["_store"]},
    "JSON": {"planner.report": ["plan_to_json"], "json": ["dumps"]},
}
IMPORTS = "imports (all but the phases')"
IMPORT_PREFIX = "import "
OTHER = "the rest (between the phases)"


class _Clock:
    """Own time per phase: a stack of the phases running, each charged its time less its children's."""

    def __init__(self) -> None:
        self.own: dict[str, float] = {}
        self._stack: list[list[float]] = []  # [start, children's time]

    def timed(self, phase: str, func):  # -> the wrapped function; an IMPORTS phase is charged per module
        def wrapper(*args, **kwargs):
            frame = [time.perf_counter(), 0.0]
            self._stack.append(frame)
            try:
                return func(*args, **kwargs)
            finally:
                self._stack.pop()
                elapsed = time.perf_counter() - frame[0]
                name = f"{IMPORT_PREFIX}{args[0]}" if phase == IMPORTS else phase
                self.own[name] = self.own.get(name, 0.0) + elapsed - frame[1]
                if self._stack:
                    self._stack[-1][1] += elapsed

        wrapper.__wrapped__ = func  # type: ignore[attr-defined]
        return wrapper


def _wrap(clock: _Clock, module: object, module_name: str) -> None:
    for phase, modules in PHASES.items():
        for name in modules.get(module_name, []):
            owner, _, attribute = name.rpartition(".")
            holder = getattr(module, owner) if owner else module
            if hasattr(holder, attribute):
                setattr(holder, attribute, clock.timed(phase, getattr(holder, attribute)))


def child(model: str, out: str) -> None:
    """One plan in this process, its phases timed; their own times written to `out` as JSON."""
    import importlib._bootstrap

    bootstrap = vars(importlib._bootstrap)  # the import statement looks `_find_and_load` up here on every import

    started = time.perf_counter()
    clock = _Clock()
    wanted = {name for modules in PHASES.values() for name in modules}
    find_and_load = bootstrap["_find_and_load"]

    def loaded(name, import_):  # every import is timed, and a module with a phase's functions is wrapped
        module = find_and_load(name, import_)
        if name in wanted:
            wanted.discard(name)
            _wrap(clock, module, name)
        return module

    bootstrap["_find_and_load"] = clock.timed(IMPORTS, loaded)
    for name in list(wanted):  # modules Python's start loaded already
        if name in sys.modules:
            wanted.discard(name)
            _wrap(clock, sys.modules[name], name)
    sys.argv = ["vramchat", "--plan", model, "--json"]
    from app.cli import main

    real_stdout = sys.stdout
    with open(os.devnull, "w") as quiet:
        sys.stdout = quiet
        try:
            code = main()
        finally:
            sys.stdout = real_stdout
    total = time.perf_counter() - started
    own = dict(clock.own)
    own[OTHER] = total - sum(own.values())
    import json

    with open(out, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"code": code, "total": total, "own": own}))


def _run(cmd: list[str], env: dict[str, str]) -> float:
    import subprocess

    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 3):
        raise SystemExit(f"{cmd} failed: {proc.stderr[-800:]}")
    return elapsed


def main() -> None:
    import argparse
    import json
    import shutil
    import statistics
    import tempfile
    from pathlib import Path

    from bench.plan_speed import keep_probe, machine_probe, model_and_env

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--runs", type=int, default=9, help="runs of each (default 9)")
    parser.add_argument("--imports", type=int, default=0, metavar="N", help="also the N modules slowest to import")
    args = parser.parse_args()

    args.model, env = model_and_env(args.model)
    home = Path(tempfile.mkdtemp(prefix="vramchat-plan-phases-"))
    own: dict[str, list[float]] = {}
    modules: dict[str, list[float]] = {}  # each module's own import time, in the runs that imported it
    walls: dict[str, list[float]] = {"first plan (phases timed)": [], "python -c pass": [], "header read alone": []}
    floor_cmd = [sys.executable, "-c", f"import planner.gguf; planner.gguf.read_gguf({args.model!r})"]
    try:
        probe = machine_probe(home / "probe")
        for run in range(args.runs):
            where = home / f"cold-{run}"
            keep_probe(probe, where)
            result = where / "phases.json"
            run_env = {**env, "VRAMCHAT_HOME": str(where)}
            walls["first plan (phases timed)"].append(
                _run([sys.executable, __file__, "--child", args.model, str(result)], run_env)
            )
            walls["python -c pass"].append(_run([sys.executable, "-c", "pass"], env))
            walls["header read alone"].append(_run(floor_cmd, env))
            by_phase: dict[str, float] = {}
            for phase, seconds in json.loads(result.read_text())["own"].items():
                if phase.startswith(IMPORT_PREFIX):
                    modules.setdefault(phase.removeprefix(IMPORT_PREFIX), []).append(seconds)
                    phase = IMPORTS
                by_phase[phase] = by_phase.get(phase, 0.0) + seconds
            for phase, seconds in by_phase.items():
                own.setdefault(phase, []).append(seconds)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"model: {args.model}; {args.runs} runs of each, interleaved; medians")
    for phase, seconds in sorted(own.items(), key=lambda item: -statistics.median(item[1])):
        print(f"  {phase:38s} {statistics.median(seconds) * 1000:6.1f} ms")
    print(f"  {'sum of the medians':38s} {sum(statistics.median(s) for s in own.values()) * 1000:6.1f} ms")
    if args.imports:
        print(f"  the {args.imports} modules slowest to import (own time, without the modules they import):")
        ranked = sorted(modules.items(), key=lambda item: -statistics.median(item[1]))
        for name, seconds in ranked[: args.imports]:
            print(f"    {name:36s} {statistics.median(seconds) * 1000:6.2f} ms")
        print(f"    ({len(modules)} modules in all)")
    medians = {name: statistics.median(ts) for name, ts in walls.items()}
    for name, value in medians.items():
        print(f"  {name + ' (whole process)':38s} {value * 1000:6.1f} ms")
    start, header = medians["python -c pass"], medians["header read alone"]
    print(
        f"1.5x the header read alone is {1.5 * header * 1000:.1f} ms: {(1.5 * header - header) * 1000:.1f} ms for all "
        f"but Python's start and the read ({(header - start) * 1000:.1f} ms above Python's start, its import included)"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:  # one timed plan: python bench/plan_phases.py --child MODEL OUT
        child(sys.argv[2], sys.argv[3])
    else:
        main()
