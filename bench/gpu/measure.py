"""GPU truth, device side: what a CUDA build of llama.cpp allocates, and what NVML sees.

    python -m bench.gpu.measure --out DIR [--budget SECONDS] [--only SECTION,...]

Sections, each written to DIR/cuda_measurements.json as soon as it is done:
- machine: the GPU, driver, CUDA and llama.cpp build;
- buffers: the oracle (bench/oracle) over the accuracy zoo, the demo model's header clone
  and a llama-8B-shaped model, at full and partial offload, flash attention on and off,
  two contexts and two micro-batch sizes: the exact bytes of every buffer per device;
- dry_runs: llama.cpp's no_alloc dry run of the same configurations, through the app's engine;
- nvml: NVML's memory of the process before load, after load, after the prompt and after a
  2,000-token generation, for a set of scenarios;
- speed and fit: bench/gpu/compare.py (the plan's speed against a run; vramchat's choice against
  llama.cpp's fit on the same free memory);
- hand_search: with another process holding all but a fixed amount of the GPU, the longest
  context that really loads and runs (found by bisection), and the solver's own choice run
  for 2,000 tokens.
Nothing here compares with the planner: that happens where the file is read, with the
planner of that checkout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.gpu import compare  # noqa: E402
from tests.support.oracle.oracle import measure  # noqa: E402
from tests.support.tiny import ZOO, TinySpec, write_tiny_model  # noqa: E402

_BIG_BATCH = {"n_batch": 2048, "n_ubatch": 2048, "prompt": 2048}
DEMO_HEADER = ROOT / ".gpu" / "demo-header.json.gz"
KEPT = ROOT / ".devbuild" / "cuda_measurements.json"
BIG = TinySpec(
    "llama",
    n_layer=32,
    n_embd=4096,
    n_head=32,
    n_head_kv=8,
    n_ff=14336,
    n_vocab=32000,
    n_ctx_train=131072,
    name="llama-8b-shape",
)


def _big_spec() -> TinySpec:
    from gguf import GGMLQuantizationType as Q

    return BIG.with_(weight_type=Q.Q4_0, embd_type=Q.Q4_0, output_type=Q.Q8_0)


class Harness:
    def __init__(self, out: Path, budget: float) -> None:
        self.out = out
        self.deadline = time.monotonic() + budget
        self.data: dict[str, Any] = {"format": 1}
        self.models: dict[str, dict[str, Any]] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="vramchat-gpu-"))

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        text = json.dumps(self.data, indent=1)
        (self.out / "cuda_measurements.json").write_text(text)
        # a later call on the same warm machine resumes from it (--models skipped): only a call that measured
        # buffers replaces it (a call that failed before them must leave the list of what is left)
        if KEPT.parent.is_dir() and "buffers" in self.data:
            KEPT.write_text(text)

    def log(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    # -- machine -------------------------------------------------------------------------------

    @staticmethod
    def _command(*argv: str) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
        except OSError as exc:
            return f"({exc})"

    def machine(self) -> None:
        import llama_cpp

        from planner import LLAMA_CPP_VERSION

        smi = self._command(
            "nvidia-smi",
            "--query-gpu=name,driver_version,memory.total,memory.free,compute_cap",
            "--format=csv,noheader",
        )
        nvcc = self._command("nvcc", "--version").splitlines()
        self.data["machine"] = {
            "date": time.strftime("%Y-%m-%d"),
            "nvidia_smi": smi,
            "nvcc": nvcc[-1] if nvcc else "",
            "llama_cpp_python": llama_cpp.__version__,
            "llama_cpp": LLAMA_CPP_VERSION,
            "system_info": llama_cpp.llama_print_system_info().decode(),
            "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
        }
        self.log(f"machine: {smi}")
        self.save()

    # -- models --------------------------------------------------------------------------------

    def write_models(self, names: list[str], big: bool) -> None:
        from tests.support.header_clone import write

        for name in names:
            if name == "gemma3-270m":
                if not DEMO_HEADER.exists():
                    continue
                path = write(DEMO_HEADER, self.tmp / "gemma3-270m.gguf")
                n_layer = 18
            else:
                spec = ZOO[name]
                path = write_tiny_model(self.tmp / f"{name}.gguf", spec)
                n_layer = spec.n_layer
            self.models[name] = {"path": str(path), "n_layer": n_layer}
        if big:
            path = write_tiny_model(self.tmp / "llama-8b-shape.gguf", _big_spec())
            self.models["llama-8b-shape"] = {"path": str(path), "n_layer": BIG.n_layer}
        self.log(f"models written: {len(self.models)}")

    # -- buffers (the oracle) ----------------------------------------------------------------

    @staticmethod
    def configs(quick: bool) -> list[dict[str, Any]]:
        out = []
        for n_ctx in (512, 4096) if not quick else (4096,):
            for fa in (False, True):
                for ubatch in (512, 128):
                    out.append({"n_ctx": n_ctx, "flash_attn": fa, "n_batch": 512, "n_ubatch": ubatch})
        out.append({"n_ctx": 4096, "flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"})
        return out

    @staticmethod
    def layer_counts(n_layer: int) -> list[int]:
        return sorted({n_layer + 1, n_layer, max(1, n_layer // 2), 0}, reverse=True)

    def buffers(self, quick: bool) -> None:
        tasks = [(name, ngl) for name, info in self.models.items() for ngl in self.layer_counts(info["n_layer"])]
        results: list[dict[str, Any]] = []
        self.data["buffers"] = results

        def run(task: tuple[str, int]) -> dict[str, Any]:
            name, ngl = task
            if self.left() < 60:
                return {"model": name, "ngl": ngl, "skipped": "out of time"}
            t = time.monotonic()
            try:
                model, rows = measure(self.models[name]["path"], self.configs(quick), n_gpu_layers=ngl, timeout=300)
                return {"model": name, "ngl": ngl, "weights": model, "rows": rows, "seconds": time.monotonic() - t}
            except Exception as exc:  # one model's failure is a result, not the end of the run
                return {"model": name, "ngl": ngl, "error": f"{type(exc).__name__}: {exc}"[-2000:]}

        with ThreadPoolExecutor(12) as pool:
            for result in pool.map(run, tasks):
                results.append(result)
                bad = result.get("error") or result.get("skipped")
                self.log(f"buffers {result['model']} ngl={result['ngl']}: {bad or 'ok'}")
        self.save()

    # -- dry runs ------------------------------------------------------------------------------

    def dry_runs(self) -> None:
        from dataclasses import asdict

        from app.engine.process import EngineProcess
        from tests.support.compare import _load_config

        out: list[dict[str, Any]] = []
        self.data["dry_runs"] = out
        by_model: dict[str, list[dict[str, Any]]] = {}
        for item in self.data.get("buffers", []):
            if "rows" in item:
                by_model.setdefault(item["model"], []).append(item)

        def run(name: str) -> list[dict[str, Any]]:
            engine = EngineProcess()
            found = []
            try:
                for item in by_model[name]:
                    for row in item["rows"]:
                        if not row["ok"] or self.left() < 30:
                            continue
                        config = _load_config(row["config"]).with_(n_gpu_layers=item["ngl"])
                        try:
                            dry = engine.dry_run(self.models[name]["path"], config)
                            found.append({"model": name, "ngl": item["ngl"], "config": row["config"], **asdict(dry)})
                        except Exception as exc:
                            error = {"model": name, "ngl": item["ngl"], "config": row["config"], "error": str(exc)}
                            found.append(error)
            finally:
                engine.close()
            return found

        with ThreadPoolExecutor(8) as pool:
            for found in pool.map(run, list(by_model)):
                out.extend(found)
        self.log(f"dry runs: {len(out)}")
        self.save()

    # -- NVML ------------------------------------------------------------------------------------

    def run_child(self, spec: dict[str, Any], timeout: float = 240) -> dict[str, Any]:
        t = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "bench.gpu.nvml_run", json.dumps(spec)],
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=ROOT,
            )
        except subprocess.TimeoutExpired:
            return {"spec": spec, "rc": None, "steps": [], "error": "timeout"}
        steps = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        return {
            "spec": spec,
            "rc": proc.returncode,
            "steps": steps,
            "stderr": proc.stderr[-1500:] if proc.returncode else "",
            "seconds": round(time.monotonic() - t, 2),
        }

    def nvml(self) -> None:
        demo = self.models.get("gemma3-270m", {}).get("path")
        big = self.models.get("llama-8b-shape", {}).get("path")
        scenarios: list[dict[str, Any]] = []
        if demo:
            for fa in (True, False):
                for ub in (512, 128):
                    scenarios.append({"model": demo, "ngl": 19, "n_ctx": 4096, "flash_attn": fa, "n_ubatch": ub})
            scenarios.append({"model": demo, "ngl": 19, "n_ctx": 32768, "flash_attn": True})
            scenarios.append({"model": demo, "ngl": 9, "n_ctx": 4096, "flash_attn": True})
            scenarios.append({"model": demo, "ngl": 0, "n_ctx": 4096, "flash_attn": True, "gen": 300})
            scenarios.append({"model": demo, "ngl": 19, "n_ctx": 4096, "flash_attn": True, **_BIG_BATCH})
        for name in ("llama-f16", "qwen3moe", "gpt-oss"):
            if name in self.models:
                scenarios.append({"model": self.models[name]["path"], "ngl": 99, "n_ctx": 4096, "flash_attn": True})
        if big:
            scenarios.append({"model": big, "ngl": 33, "n_ctx": 8192, "flash_attn": True})
            scenarios.append({"model": big, "ngl": 33, "n_ctx": 8192, "flash_attn": False})
            scenarios.append({"model": big, "ngl": 33, "n_ctx": 8192, "flash_attn": True, **_BIG_BATCH})
            scenarios.append({"model": big, "ngl": 17, "n_ctx": 8192, "flash_attn": True, "gen": 200})
            # the pool's growth without flash attention over a long prompt
            scenarios.append({"model": big, "ngl": 33, "n_ctx": 8192, "flash_attn": False, "prompt": 6144, "gen": 200})
        names = {info["path"]: name for name, info in self.models.items()}
        out: list[dict[str, Any]] = []
        self.data["nvml"] = out
        for spec in scenarios:
            if self.left() < 90:
                break
            result = self.run_child({"gen": 2000, "swa_full": False, **spec})
            result["model"] = names.get(spec["model"], spec["model"])
            out.append(result)
            last = result["steps"][-1] if result["steps"] else {}
            self.log(f"nvml {result['model']}: rc={result['rc']} last={last.get('step')} proc={last.get('proc')}")
            self.save()

    # -- hand search ---------------------------------------------------------------------------

    def hand_search(self, target_free: int, solver_only: bool = False) -> None:
        big = self.models["llama-8b-shape"]["path"]
        hold = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "gpu" / "hold.py"), str(target_free)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        record: dict[str, Any] = {"target_free": target_free, "tries": []}
        self.data.setdefault("hand_search", []).append(record)
        try:
            line = hold.stdout.readline() if hold.stdout else ""
            record["hold"] = json.loads(line) if line.startswith("{") else {"error": line}
            self.log(f"hold: {record['hold']}")
            base = {"model": big, "ngl": 33, "flash_attn": True, "prompt": 512}
            record["solver"] = self.solver_choice(big)
            if not solver_only:
                lo, hi = 4096, 131072
                ok_lo = self.run_child({**base, "n_ctx": lo, "gen": 16})
                record["tries"].append(ok_lo)
                if ok_lo["rc"] == 0:
                    while hi - lo > 1024 and self.left() > 120:
                        mid = (lo + hi) // 2 // 1024 * 1024
                        result = self.run_child({**base, "n_ctx": mid, "gen": 16})
                        record["tries"].append(result)
                        self.log(f"hand search n_ctx={mid}: rc={result['rc']}")
                        if result["rc"] == 0:
                            lo = mid
                        else:
                            hi = mid
                    record["best"] = lo
                    record["best_run"] = self.run_child({**base, "n_ctx": lo, "gen": 2000})
                    self.log(f"hand search best n_ctx={lo}: rc={record['best_run']['rc']}")
            solver = record["solver"]
            if "config" in solver and self.left() > 60:
                c = solver["config"]
                spec = {
                    "model": big,
                    "ngl": c["n_gpu_layers"],
                    "n_ctx": c["n_ctx"],
                    "n_batch": c["n_batch"],
                    "n_ubatch": c["n_ubatch"],
                    "flash_attn": c["flash_attn"],
                    "type_k": c["type_k"],
                    "type_v": c["type_v"],
                    "prompt": 512,
                    "gen": 2000,
                }
                solver["run"] = self.run_child(spec)
                self.log(f"solver's choice n_ctx={c['n_ctx']} ngl={c['n_gpu_layers']}: rc={solver['run']['rc']}")
        finally:
            if hold.stdin:
                hold.stdin.close()
            hold.wait(timeout=60)
            self.save()

    def solver_choice(self, path: str) -> dict[str, Any]:
        """What vramchat's solver picks on this GPU as the app probes it (other processes' load included)."""
        try:
            from app.devices import probe_devices
            from planner.anatomy import load_anatomy
            from planner.fit import solve
            from planner.gguf import read_gguf
            from tests.support.gpu_record import HAND_SEARCH_WISHES

            report = probe_devices()
            model = load_anatomy(read_gguf(path))
            fit = solve(model, report.gpus, report.host, HAND_SEARCH_WISHES)
            gpu = fit.plan.gpus[0] if fit.plan.gpus else None
            cli = subprocess.run(
                [sys.executable, "-m", "app", "--plan", path, "--ctx", "131072", "--elastic", "off", "--json"],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=120,
            )
            return {
                "devices": [vars(d) for d in report.gpus],
                "warnings": report.warnings,
                "config": fit.plan.config.to_json(),
                "planned_gpu": gpu.planned if gpu else None,
                "gpu_free": gpu.free if gpu else None,
                "estimates": fit.plan.estimates,
                "cli_rc": cli.returncode,
                "cli": cli.stdout[-6000:] if cli.returncode == 0 else cli.stderr[-3000:],
            }
        except Exception as exc:
            import traceback

            return {"error": traceback.format_exc()[-3000:], "message": str(exc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=520, help="seconds for the whole run")
    parser.add_argument("--only", default="machine,buffers,nvml,hand_search,dry_runs")
    parser.add_argument("--fit-free", default="16,3", help="GiB left free for the fit comparisons")
    parser.add_argument("--models", default="", help="comma-separated zoo names, or 'new' (default: the accuracy zoo)")
    parser.add_argument("--quick", action="store_true", help="one context instead of two")
    parser.add_argument("--free", type=float, default=16.0, help="GiB left free for the hand search")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    h = Harness(args.out, args.budget)
    if args.models == "new":  # the zoo's models the H100 record lacks, and those the other sections use
        import gzip

        from bench.accuracy import FAMILIES

        with gzip.open(ROOT / "tests" / "data" / "cuda_h100.json.gz", "rt") as fh:
            recorded = {item["model"] for item in json.load(fh)["buffers"]}
        names = ["gemma3-270m", "llama-f16", "qwen3moe", "gpt-oss"]
        names += [n for _, group in FAMILIES for n in group if n not in recorded and n not in names]
    elif args.models == "skipped":  # what the last call on this machine ran out of time for
        last = json.loads(KEPT.read_text()) if KEPT.exists() else {}
        names = sorted({item["model"] for item in last.get("buffers", []) if "skipped" in item} - {BIG.name})
    elif args.models:
        names = args.models.split(",")
    else:
        from bench.accuracy import FAMILIES

        names = [n for _, group in FAMILIES for n in group]
    h.machine()
    h.write_models(names, big=bool({"nvml", "hand_search", "speed", "fit"} & only))
    if "speed" in only:
        compare.speed(h)
    if "nvml" in only:
        h.nvml()
    if "fit" in only:
        for free in args.fit_free.split(","):
            if h.left() > 90:
                compare.fit(h, float(free))
    if "buffers" in only:
        h.buffers(args.quick)
    if "hand_search" in only:
        h.hand_search(int(args.free * 1024**3), solver_only="solver_only" in only)
    if "dry_runs" in only:
        h.dry_runs()
    h.log(f"done, {h.left():.0f} s of the budget left")


if __name__ == "__main__":
    main()
