"""The CUDA context rule against the public measurements, and what it predicts per card (docs/accuracy.md).

    python -m bench.gpu.overhead_table

Prints markdown: each measured GPU beside the rule (13 MiB + 2,002 B x SMs x max threads per SM), then
the overhead planned for common cards (the demo model, 4,096 tokens, flash attention on and off), and
the pool's growth without flash attention that the plan names for a llama-8B-shaped model.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from planner.anatomy import load_anatomy
from planner.cards import card_device, find_card
from planner.fit import evaluate, fixed_config
from planner.gguf import read_gguf
from planner.gpu_overhead import CUDA_CONTEXT, PUBLIC_CONTEXTS, Workload, context_for, gpu_overhead
from planner.hardware import GiB, Host, MiB

CARDS = ("RTX 3060", "RTX 4060", "RTX 4070", "RTX 4090", "RTX 5090", "T4", "V100", "A100", "H100", "B200")


def _mib(n: float) -> str:
    return f"{n / MiB:,.0f} MiB"


def rule_table() -> list[str]:
    lines = [
        "| GPU | SMs | threads per SM | measured | the rule | difference | source |",
        "|---|---|---|---|---|---|---|",
    ]
    worst = 0.0
    for card, sms, threads, low, high, where in PUBLIC_CONTEXTS:
        measured = (low + high) / 2 * MiB
        rule = context_for(sms, threads)
        worst = max(worst, abs(rule - measured) / measured)
        off = 100 * (rule - measured) / measured
        lines.append(f"| {card} | {sms} | {threads:,} | {low:g} MiB | {_mib(rule)} | {off:+.1f}% | {where} |")
    lines.append("")
    lines.append(f"Largest difference: {100 * worst:.1f}%. Our H100 keeps its measured {_mib(CUDA_CONTEXT)} exactly.")
    return lines


def card_table() -> list[str]:
    lines = [
        "| card | SMs x threads | compute capability | context | runtime, flash attention | runtime, cuBLAS |",
        "|---|---|---|---|---|---|",
    ]
    for name in CARDS:
        card = find_card(name)
        device = card_device(card, 0, "CUDA0")
        fa = gpu_overhead(device, Workload(flash_attn=True, experts=False))
        cublas = gpu_overhead(device, Workload(flash_attn=False, experts=False))
        workspace = _mib(cublas.parts["cublas_workspace"])
        lines.append(
            f"| {card.name} | {card.sm_count} x {card.threads_per_sm:,} | {card.compute_capability} "
            f"| {_mib(fa.context)} | {_mib(fa.runtime)} | {_mib(cublas.runtime)} (workspace {workspace}) |"
        )
    return lines


def growth_table(model_path: str) -> list[str]:
    model = load_anatomy(read_gguf(model_path))
    host = Host(256 * GiB, 256 * GiB)
    lines = ["| card | context | KQ matrix in the compute buffer | attention pool planned |", "|---|---|---|---|"]
    for name in ("RTX 4090", "H100", "V100", "GTX 1080 Ti"):
        device = card_device(find_card(name), 0, "CUDA0")
        for n_ctx in (8192, 32768):
            config = fixed_config(model, [device], n_gpu_layers=model.n_layer + 1, n_ctx=n_ctx, flash_attn=False)
            usage = evaluate(model, config, [device], host).plan.gpus[0]
            assert usage.overhead_detail is not None
            kq = n_ctx * 512 * model.layers[0].n_head * 4
            pool = usage.overhead_detail.parts.get("attention_pool", 0)
            lines.append(f"| {name} | {n_ctx:,} | {_mib(kq)} | {_mib(pool)} |")
    return lines


def main() -> int:
    from tests.support.gpu_record import DATA
    from tests.support.header_clone import write

    print("\n".join(rule_table()))
    print()
    print("\n".join(card_table()))
    print()
    with tempfile.TemporaryDirectory() as tmp:
        path = write(DATA / "llama-8b-shape.header.json.gz", Path(tmp) / "big.gguf", sparse=True)
        print("\n".join(growth_table(str(path))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
