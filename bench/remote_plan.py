"""Planning models that are not on this machine: bytes read, and the time of `--quants` cold and cached.

    python bench/remote_plan.py [--runs 5] [--quants all|N]

Serves real GGUF files from a local hub (tests/support/hub_server.py, huggingface_hub pointed at it
with HF_ENDPOINT): the demo model, the demo cut in 3 shards, and a repo of the demo at 15 quants
(its real header, each quant's tensor types, zeros for data in sparse files), one of them also split,
with a projector. Then, each a fresh `vramchat` process as a user runs it:

1. `--plan URL --json` and `--plan hf:REPO/FILE --json` against `--plan LOCAL --json` (simulated devices,
   so that free memory is the same): equal but for the path, and the bytes the server sent.
2. `--quants ORG/REPO` cold (an empty cache), from the cache, and `--quants FOLDER` on the same files
   on disk (cold and cached), interleaved, medians of --runs.

The server hashes each file once before the runs (the hub has its sha256 at hand).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.hub_server import LocalHub  # noqa: E402
from tests.support.remote_models import QUANTS, quant_repo, split_model  # noqa: E402

VRAMCHAT = [sys.executable, "-m", "app"]
WHAT_IF = ["--vram", "8GiB", "--ram", "32GiB"]
REPO = "bench/gemma-3-270m-GGUF"


def _run(words: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run([*VRAMCHAT, *words], env=env, capture_output=True, text=True, cwd=ROOT)
    return time.perf_counter() - started, proc


def _plan(words: list[str], env: dict[str, str]) -> dict:
    _, proc = _run(["--plan", *words, "--json", *WHAT_IF], env)
    if proc.returncode != 0:
        raise SystemExit(f"vramchat --plan {words[0]} failed: {proc.stderr.strip()}")
    data = json.loads(proc.stdout)
    data["model"].pop("path")
    data.pop("llama_args")
    return data


def _header_bytes(path: Path) -> int:
    from planner.gguf import read_gguf

    return sum(shard.data_offset for shard in read_gguf(path).shards)


def _serve_all(hub: LocalHub, shards: list[Path]) -> str:
    """Every shard at its URL; the first one's."""
    urls = [hub.add_file(s.name, s) for s in shards]
    return urls[0]


def bytes_read(hub: LocalHub, demo: Path, shards: list[Path], env: dict[str, str]) -> list[str]:
    lines = [
        "| model | read as | equal to the local plan | bytes read | header | file | read / header |",
        "|---|---|---|---|---|---|---|",
    ]
    hub.add_repo("bench/demo", {demo.name: demo})
    hub.add_repo("bench/split", {s.name: s for s in shards})
    cases = [
        ("demo", "URL", hub.add_file(demo.name, demo), demo, [demo]),
        ("demo", "hub", f"hf:bench/demo/{demo.name}", demo, [demo]),
        ("demo in 3 shards", "URL", _serve_all(hub, shards), shards[0], shards),
        ("demo in 3 shards", "hub", f"hf:bench/split/{shards[0].name}", shards[0], shards),
    ]
    for name, how, ref, local, files in cases:
        home = Path(tempfile.mkdtemp(prefix="vramchat-bench-home-"))
        try:
            run_env = {**env, "VRAMCHAT_HOME": str(home)}
            hub.clear_log()
            remote = _plan([ref], run_env)
            sent = hub.bytes_sent()
            same = remote == _plan([str(local)], run_env)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        header = _header_bytes(local)
        size = sum(f.stat().st_size for f in files)
        lines.append(
            f"| {name} | {how} | {'yes' if same else 'NO'} | {sent:,} | {header:,} | {size:,} | {sent / header:.2f}x |"
        )
    return lines


def quants_times(hub: LocalHub, folder: Path, runs: int, env: dict[str, str]) -> tuple[list[str], str]:
    kinds = {
        "hub, cold (empty cache)": (["--quants", REPO], True),
        "hub, from the cache": (["--quants", REPO], False),
        "local folder, cold": (["--quants", str(folder)], True),
        "local folder, cached": (["--quants", str(folder)], False),
    }
    times: dict[str, list[float]] = {k: [] for k in kinds}
    warm_home = Path(tempfile.mkdtemp(prefix="vramchat-bench-warm-"))
    table = ""
    try:
        warm_env = {**env, "VRAMCHAT_HOME": str(warm_home)}
        for words, _ in kinds.values():  # fill the warm cache
            _run([*words, *WHAT_IF], warm_env)
        for _ in range(runs):
            for kind, (words, cold) in kinds.items():
                home = Path(tempfile.mkdtemp(prefix="vramchat-bench-cold-")) if cold else warm_home
                try:
                    took, proc = _run([*words, *WHAT_IF], {**env, "VRAMCHAT_HOME": str(home)})
                finally:
                    if cold:
                        shutil.rmtree(home, ignore_errors=True)
                if proc.returncode not in (0, 3):
                    raise SystemExit(f"vramchat {' '.join(words)} failed: {proc.stderr.strip()}")
                if kind.startswith("hub") and not table:
                    table = proc.stdout
                times[kind].append(took)
    finally:
        shutil.rmtree(warm_home, ignore_errors=True)
    lines = ["| vramchat --quants (16 models) | median | runs |", "|---|---|---|"]
    for kind, values in times.items():
        lines.append(f"| {kind} | {statistics.median(values):.2f} s | {', '.join(f'{v:.2f}' for v in values)} |")
    return lines, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    from app.demo import demo_model_path

    demo = Path(demo_model_path())
    with tempfile.TemporaryDirectory(prefix="vramchat-bench-remote-") as tmp, LocalHub() as hub:
        base = Path(tmp)
        files = quant_repo(demo, base / "repo", "gemma-3-270m", QUANTS)
        shards = split_model(demo, base / "split", 3)
        hub.add_repo(REPO, files, downloads=1)
        local = base / "local"  # the same files on disk, as a folder to plan
        for name, path in files.items():
            target = local / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
        for name in files:  # the hub has every sha256 at hand: hash before timing
            hub.repos[REPO].sibling(name)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VRAMCHAT_"))}
        env.update(HF_ENDPOINT=hub.url, HF_HOME=str(base / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1")
        print("## Bytes read for a remote plan\n")
        print("\n".join(bytes_read(hub, demo, shards, env)))
        print(f"\n## --quants on a repo of {len(QUANTS)} quants + 1 split (16 models), {args.runs} runs\n")
        lines, table = quants_times(hub, local, args.runs, env)
        print("\n".join(lines))
        print("\nThe table (hub, cold):\n")
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
