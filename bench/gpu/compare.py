"""GPU truth, device side: speed beside the plan's prediction, and vramchat's choice beside llama.cpp's fit.

Two sections of `bench.gpu.measure` (the Harness runs them; each saves as soon as it is done):
- speed: for the demo's clone and the 8B-shaped model at full, partial and no offload, what
  `vramchat --plan` predicts on this machine (NVML's bandwidth, the CPU probed here) and what one
  run measures: a 512-token prompt read warm, then 256 tokens decoded, with the engine's threads;
- fit: with another process holding all but a fixed amount of the GPU, the configuration that
  `vramchat --plan` chooses and the one `llama-fit-params` (llama.cpp's --fit, built from the same
  vendored source by build.sh) chooses, each loaded and run: memory, context, tokens per second.
The weights are written, not trained: the kernels' time does not depend on the values (nothing is
sampled; tokens are fed), which is what speed needs; what the words would be, it does not.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.gpu.measure import Harness

ROOT = Path(__file__).resolve().parents[2]
FIT_PARAMS = ROOT / ".devbuild" / "cmake" / "bin" / "llama-fit-params"
_FIT_LINE = re.compile(r"-c (?P<ctx>\d+) -ngl (?P<ngl>-?\d+)")
_HOME = Path(tempfile.mkdtemp(prefix="vramchat-home-"))  # one home: the CPU is probed once


def plan_json(path: str, *knobs: str) -> dict[str, Any]:
    """`vramchat --plan PATH KNOBS --json` on this machine, or the error it printed."""
    env = {**os.environ, "VRAMCHAT_HOME": str(_HOME)}
    proc = subprocess.run(
        [sys.executable, "-m", "app", "--plan", path, *knobs, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=180,
    )
    if proc.returncode != 0 or not proc.stdout.strip().startswith("{"):
        return {"rc": proc.returncode, "error": (proc.stderr or proc.stdout)[-3000:]}
    data = json.loads(proc.stdout)
    return {
        "rc": 0,
        "config": data.get("config"),
        "speed": data.get("speed"),
        "devices": data.get("devices"),
        "host": data.get("host"),
        "verdict": data.get("verdict"),
        "estimates": data.get("estimates"),
    }


def _threads() -> int:
    return max(1, os.cpu_count() or 1)  # what the app's engine uses (app/engine/engine.py)


def speed(h: Harness) -> None:
    demo = h.models.get("gemma3-270m", {}).get("path")
    big = h.models.get("llama-8b-shape", {}).get("path")
    scenarios = []
    if demo:
        scenarios += [("gemma3-270m", demo, 19, 256), ("gemma3-270m", demo, 9, 256), ("gemma3-270m", demo, 0, 64)]
    if big:
        scenarios += [("llama-8b-shape", big, 33, 256), ("llama-8b-shape", big, 17, 64)]
    out: list[dict[str, Any]] = []
    h.data["speed"] = out
    for name, path, ngl, gen in scenarios:
        if h.left() < 60:
            break
        knobs = ("--ngl", str(ngl), "--ctx", "4096", "--fa", "on", "--ctk", "f16", "--ctv", "f16")
        planned = plan_json(path, *knobs)
        # sampled as a reply is (the plan's figure pays the engine's sampler chain: 2.3 ms a token for the
        # demo's vocabulary on a lent H200's host CPU, more than the GPU's whole token)
        spec = {"model": path, "ngl": ngl, "n_ctx": 4096, "flash_attn": True, "prompt": 512, "gen": gen, "sample": True}
        run = h.run_child({**spec, "threads": _threads(), "swa_full": False}, timeout=180)
        out.append({"model": name, "ngl": ngl, "plan": planned, "run": run})
        steps = {s["step"]: s for s in run["steps"]}
        got = {k: round(steps[k]["tokens"] / steps[k]["seconds"], 1) for k in ("prefill", "generation") if k in steps}
        h.log(f"speed {name} ngl={ngl}: measured {got}, plan rc={planned['rc']}")
        h.save()


def fit_params(path: str) -> dict[str, Any]:
    """What llama.cpp's own fit chooses for `path` on the memory free now (its defaults: 1 GiB margin)."""
    if not FIT_PARAMS.exists():
        return {"error": f"{FIT_PARAMS} was not built"}
    proc = subprocess.run([str(FIT_PARAMS), "-m", path], capture_output=True, text=True, timeout=180)
    m = _FIT_LINE.search(proc.stdout)
    result: dict[str, Any] = {"rc": proc.returncode, "stdout": proc.stdout[-500:], "stderr": proc.stderr[-2500:]}
    if m:
        result.update(n_ctx=int(m["ctx"]), ngl=int(m["ngl"]))
    return result


def fit(h: Harness, free_gib: float) -> None:
    big = h.models["llama-8b-shape"]["path"]
    hold = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "gpu" / "hold.py"), str(int(free_gib * 1024**3))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    record: dict[str, Any] = {"free_gib": free_gib}
    h.data.setdefault("fit", []).append(record)
    try:
        line = hold.stdout.readline() if hold.stdout else ""
        record["hold"] = json.loads(line) if line.startswith("{") else {"error": line}
        record["llama_fit"] = fit_params(big)
        record["vramchat"] = plan_json(big)
        h.log(f"fit {free_gib} GiB free: llama.cpp {record['llama_fit'].get('n_ctx')}/{record['llama_fit'].get('ngl')}")
        base = {"model": big, "prompt": 512, "gen": 128, "threads": _threads(), "swa_full": False}
        ours = record["vramchat"].get("config")
        if ours and h.left() > 40:
            keys = ("n_ctx", "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v")
            spec = {**base, "ngl": ours["n_gpu_layers"], **{k: ours[k] for k in keys}}
            record["vramchat_run"] = h.run_child(spec, timeout=180)
        theirs = record["llama_fit"]
        if "n_ctx" in theirs and h.left() > 40:  # its flash attention is "auto": on for CUDA
            spec = {**base, "ngl": theirs["ngl"], "n_ctx": theirs["n_ctx"], "flash_attn": True}
            record["llama_fit_run"] = h.run_child(spec, timeout=180)
    finally:
        if hold.stdin:
            hold.stdin.close()
        hold.wait(timeout=60)
        h.save()
