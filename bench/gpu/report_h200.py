"""The H200 section of docs/accuracy.md, from its record (tests/data/cuda_h200.json.gz).

    python -m bench.gpu.report_h200 [--out docs/accuracy.md]

Four tables, each priced by the planner of this checkout where it plans: every buffer of the zoo
models the H100 record lacks; the process as NVML saw it; speed measured beside the plan's figure;
vramchat's choice beside llama.cpp's own fit on the same free memory. Recorded by bench/gpu/lent.sh.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.gpu.report import _buffer_table, model_paths  # noqa: E402
from bench.sections import replace_section  # noqa: E402
from planner.hardware import GiB, MiB  # noqa: E402
from tests.support.gpu_record import DATA, compare_record, load_record, planned_for_run, within  # noqa: E402

BEGIN, END = "<!-- cuda-h200:begin -->", "<!-- cuda-h200:end -->"
RECORD = DATA / "cuda_h200.json.gz"
_ALL_LAYERS = {"gemma3-270m": 19, "llama-8b-shape": 33}


def _steps(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["step"]: s for s in run["steps"]}


def _rate(step: dict[str, Any] | None) -> float | None:
    return step["tokens"] / step["seconds"] if step and step.get("seconds") else None


def _rates(runs: list[dict[str, dict[str, Any]]]) -> tuple[str, str]:
    """Prefill and decode tok/s of each run, "a / b"."""
    prefill = " / ".join(f"{_rate(r.get('prefill')) or 0:,.0f}" for r in runs)
    decode = " / ".join(f"{_rate(r.get('generation')) or 0:,.1f}" for r in runs)
    return prefill, decode


def buffers(record: dict[str, Any], paths: dict[str, str]) -> list[str]:
    rows = compare_record(record, paths)
    loaded = [r for r in rows if not (r.refused_by_llama or r.refused_by_planner)]
    bufs = [b for r in loaded for b in r.buffers]
    off = [(r, b) for r in loaded for b in r.buffers if not within(b)]
    refusals = sum(1 for r in rows if bool(r.refused_by_llama) != bool(r.refused_by_planner))
    dry = sum(len(r.dry_run_off()) for r in loaded)
    return [
        f"Every buffer: {len(rows):,} configurations of {len({r.model for r in rows})} models "
        f"({len({r.architecture for r in rows})} architectures; the 82 the H100 record lacks and four of its own), "
        f"the same grid as the H100's; {len(bufs):,} buffers, {sum(1 for b in bufs if b.error == 0):,} exact to "
        f"the byte, **{len(off)} outside the tolerance**, {refusals} refusals that differ; dry run: "
        f"{sum(1 for r in loaded if r.dry_run):,} configurations, {dry} kinds off by more than the log's rounding. "
        "The four models measured on both cards allocated the same bytes on each (144 configurations), and the "
        "first call's models measured again in the last call gave the same bytes (1,512 configurations).",
        "",
        *_buffer_table(rows),
    ]


def nvml(record: dict[str, Any], paths: dict[str, str]) -> list[str]:
    out = [
        "| model | layers on GPU | context | flash attention | ubatch | prompt | planned CUDA0 | NVML after the reply "
        "| difference |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in record["nvml"]:
        if run["rc"] != 0:
            continue
        s = run["spec"]
        planned = planned_for_run(record, run, paths[run["model"]])
        proc = run["steps"][-1]["proc"]
        out.append(
            f"| {run['model']} | {s['ngl']} | {s['n_ctx']:,} | {'on' if s['flash_attn'] else 'off'} | "
            f"{s.get('n_ubatch', 512)} | {s.get('prompt', 512):,} | {planned / MiB:,.0f} MiB | {proc / MiB:,.0f} MiB | "
            f"{(planned - proc) / MiB:+.0f} MiB |"
        )
    return out


def speed(record: dict[str, Any]) -> list[str]:
    out = [
        "| model | layers on GPU | prefill, tok/s (two runs) | decode, tok/s (two runs) | plan: CUDA0 time a token "
        "| as tok/s | the plan's figure |",
        "|---|---|---|---|---|---|---|",
    ]
    by: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for item in record["speed"]:
        by.setdefault((item["model"], item["ngl"]), []).append(item)
    for (model, ngl), items in by.items():
        prefill, decode = _rates([_steps(i["run"]) for i in items])
        plan = items[0]["plan"].get("speed") or {}
        gpu = next((d for d in plan.get("devices", []) if d["name"] == "CUDA0"), None)
        seconds = gpu.get("seconds_per_token") if gpu else None
        gpu_cell = f"{seconds * 1000:.2f} ms" if seconds else "-"
        full = seconds and ngl == _ALL_LAYERS.get(model)
        rate = f"{1 / seconds:,.0f}" if full else "-"
        figure = (plan.get("decode_start") or {}).get("tokens_per_second")
        said = "unknown (the CPU probe failed)" if figure is None else f"{figure:,.0f}"
        out.append(f"| {model} | {ngl} | {prefill} | {decode} | {gpu_cell} | {rate} | {said} |")
    return out


def fit(record: dict[str, Any]) -> list[str]:
    out = [
        "| free on the GPU | who chose | layers on GPU | context | KV cache | NVML after the reply | left free | "
        "prefill, tok/s | decode, tok/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for item in record["fit"]:
        if item.get("round") != 1:
            continue
        free = item["hold"]["free"]
        for who, key in (("vramchat --plan", "vramchat_run"), ("llama-fit-params", "llama_fit_run")):
            run = item.get(key)
            if not run:
                continue
            spec, steps = run["spec"], _steps(run)
            again = next(
                (i.get(key) for i in record["fit"] if i.get("round") == 2 and i["free_gib"] == item["free_gib"]), None
            )
            prefill, decode = _rates([steps] + ([_steps(again)] if again else []))
            last = run["steps"][-1]
            ngl = "all" if spec["ngl"] < 0 or spec["ngl"] >= 33 else str(spec["ngl"])
            out.append(
                f"| {free / GiB:.1f} GiB | {who} | {ngl} | {spec['n_ctx']:,} | {spec.get('type_k', 'f16')} | "
                f"{last['proc'] / MiB:,.0f} MiB | {last['free'] / MiB:,.0f} MiB | {prefill} | {decode} |"
            )
    return out


def render(record: dict[str, Any], paths: dict[str, str]) -> list[str]:
    machine = record["machine"]
    gpu, driver, *_ = (x.strip() for x in machine["nvidia_smi"].split(","))
    cuda = re.search(r"cuda_(\d+\.\d+)", machine["nvcc"])
    return [
        BEGIN,
        "## CUDA on an H200",
        "",
        f"Recorded on {machine['date']} on a lent {gpu} (driver {driver}, CUDA {cuda[1] if cuda else '?'}, "
        f"llama-cpp-python {machine['llama_cpp_python']} built with `-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90`, "
        "16 CPU cores with AMX) by `bash bench/gpu/lent.sh` in one build and four measuring calls; rendered from "
        "`tests/data/cuda_h200.json.gz` by `python -m bench.gpu.report_h200` with the planner of this checkout; "
        "`tests/planner/test_cuda_h200_record.py` checks the buffers and NVML on every test run. Models are "
        "written, not trained (the zoo, the demo's header with zeroed data, a llama-8B-shaped Q4_0 with random "
        "data): the kernels' time does not depend on the values, and tokens are fed, not sampled.",
        "",
        *buffers(record, paths),
        "",
        "### The process as NVML sees it",
        "",
        "After a 512-token prompt (one run 6,144) and a reply; without flash attention the plan counts "
        "ggml-cuda's attention pool at a full context, and this table prices it as far as each prompt grew it "
        "(a reply's single tokens never use it). The last row measured that rule: 174 MiB more than at 512 "
        "tokens, where the rule says 176.",
        "",
        *nvml(record, paths),
        "",
        "### Speed",
        "",
        "A 512-token prompt read a second time into an emptied cache (the first read pays CUDA's set-up), then "
        "256 tokens decoded (64 with layers on the CPU), with the engine's 16 threads and a 4,096-token context. "
        "The plan's figure was unknown in these runs: the CPU probe failed on 16 threads (ggml's work buffer "
        "outgrew its allowance; fixed, `tests/app/test_speed.py`), and a prediction needs the CPU's part. Its "
        "CUDA0 part (NVML's bandwidth, 4,814 GB/s) is shown: for the full offloads the plan's GPU time a token "
        "against the decode measured.",
        "",
        *speed(record),
        "",
        "### Against llama.cpp's own fit",
        "",
        "Another process held all but 16 or 3 GiB of the GPU; `llama-fit-params` (built from the same vendored "
        "source, its defaults: a 1 GiB margin, the trained context as the wish) and `vramchat --plan` (its "
        "defaults: a 32,768-token wish, a 256 MiB margin) each chose for the llama-8B shape; each choice was "
        "loaded and run (512-token prompt, 128 tokens; two rounds).",
        "",
        *fit(record),
        END,
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "accuracy.md"))
    args = parser.parse_args()
    record = load_record(RECORD)
    with tempfile.TemporaryDirectory(prefix="vramchat-h200-report-") as tmp:
        section = "\n".join(render(record, model_paths(Path(tmp))))
    replace_section(Path(args.out), BEGIN, END, section)
    print(f"wrote the H200 section of {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
