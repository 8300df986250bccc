"""Time from `vramchat` to the picker drawn, with 20 models in the models folder.

    python bench/startup.py [--models N] [--runs N] [--profile FILE] [--before TREE] [--floor]

Writes N tiny models (tests/support/tiny/) into a fresh vramchat home, then starts
the real `vramchat` command in a pseudo-terminal (160x45) several times. The first
start plans every model; later starts read the plan cache. For each start it prints
the time until the model list is drawn ("listed") and until every badge is fresh
("planned"), both from the moment the process is spawned. The app reports the two
moments through VRAMCHAT_BENCH_READY and quits by itself. --before TREE starts another checkout of
vramchat too (an earlier commit's `git worktree`, first on PYTHONPATH, same interpreter), in a home
of its own with the same models, its starts interleaved with this one's. --floor also starts,
interleaved, a bare Textual app that draws the same list (bench/textual_floor.py): the least any
Textual picker takes on this machine. Every home has this machine's speed probe before the first start
(measured once, as a user's home keeps it): without it the first start would begin the probe in the
background, and its seconds of work would run beside the starts being timed.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def write_models(folder: Path, count: int) -> None:
    from tests.support.tiny import ZOO, write_tiny_model

    folder.mkdir(parents=True, exist_ok=True)
    specs = list(ZOO.items())
    for i in range(count):
        name, spec = specs[i % len(specs)]
        write_tiny_model(folder / f"{name}-{i:02d}.gguf", spec.with_(name=f"{name} #{i}"), seed=i)


def start_once(
    home: Path,
    timeout: float = 60.0,
    profile: Path | None = None,
    tree: Path | None = None,
    floor: bool = False,
) -> dict[str, float]:
    marks = home / "bench-marks.txt"
    marks.unlink(missing_ok=True)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 45, 160, 0, 0))
    env = dict(os.environ, VRAMCHAT_HOME=str(home), VRAMCHAT_BENCH_READY=str(marks), TERM="xterm-256color")
    env.pop("VRAMCHAT_DEVICES", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed vramchat has its bytecode compiled
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    vramchat = Path(sys.executable).with_name("vramchat")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    command = [str(vramchat)]
    if floor:  # the bare Textual app that shows the same list (bench/textual_floor.py)
        command = [sys.executable, str(ROOT / "bench" / "textual_floor.py"), str(home / "data" / "models")]
    if profile is not None:  # the app itself, not its guardian (which only waits for it)
        command = [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "app"]
        env["VRAMCHAT_NO_GUARD"] = "1"
    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)

    def drain() -> None:  # keep the terminal's buffer empty, as a terminal would
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise SystemExit("vramchat did not report ready in time") from None
    finally:
        os.close(master)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    events = {}
    for line in marks.read_text().splitlines():
        event, stamp = line.split()
        events[event] = float(stamp) - started
    # the app's CPU time (user + system, its guardian's and worker threads' included) until it quit:
    # steadier than the wall time on a machine others share
    events["cpu"] = after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20, help="tiny models to write (default 20)")
    parser.add_argument("--runs", type=int, default=5, help="warm starts to time (default 5)")
    parser.add_argument("--profile", type=Path, help="then one more warm start under cProfile, saved to this file")
    parser.add_argument("--before", type=Path, help="also start this checkout (an earlier commit), interleaved")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also start a bare Textual app that shows the same list (bench/textual_floor.py), interleaved",
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="vramchat-startup-"))
    trees: dict[str, Path | None] = {"this tree": None}
    if args.before is not None:
        trees["before"] = args.before.resolve()
    homes = {name: root / name.replace(" ", "-") for name in trees}
    try:
        from bench.plan_speed import keep_probe, machine_probe

        probe = machine_probe(root / "probe")
        for home in homes.values():
            write_models(home / "data" / "models", args.models)
            keep_probe(probe, home)
        cold = {name: start_once(homes[name], tree=tree) for name, tree in trees.items()}
        warm: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        floor: list[float] = []
        for _ in range(args.runs):
            for name, tree in trees.items():
                warm[name].append(start_once(homes[name], tree=tree))
            if args.floor:
                floor.append(start_once(homes["this tree"], floor=True)["listed"])
        if args.profile:
            start_once(homes["this tree"], profile=args.profile.resolve())
        folder = homes["this tree"] / "data" / "models"
        found = len(list(folder.glob("*.gguf")))  # the demo model is assembled on first start
        print(f"{found} models in {folder} ({args.models} tiny + the demo model when installed)")
        for name in trees:
            c = cold[name]
            listed = [w["listed"] for w in warm[name]]
            planned = [w["planned"] for w in warm[name]]
            cpu = [w["cpu"] for w in warm[name]]
            print(f"{name}:")
            print(
                f"  first start (plans every model):  list drawn {c['listed']:.3f} s, all planned {c['planned']:.3f} s"
            )
            print(
                f"  second start (plan cache warm), {args.runs} runs: list drawn median "
                f"{statistics.median(listed):.3f} s (max {max(listed):.3f}), all badges fresh median "
                f"{statistics.median(planned):.3f} s; CPU time to exit median {statistics.median(cpu):.3f} s"
            )
        if floor:
            print(
                f"bare Textual app with the same list (the floor), {args.runs} runs: list drawn median "
                f"{statistics.median(floor):.3f} s (max {max(floor):.3f})"
            )
            ratio = statistics.median(w["listed"] for w in warm["this tree"]) / statistics.median(floor)
            print(f"  this tree's second start: {ratio:.2f}x the floor")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
