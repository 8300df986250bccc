"""The plan as JSON (the `--plan --json` contract, schema 1) and as a readable table."""

from __future__ import annotations

from typing import Any

from planner import LLAMA_CPP_BUILD
from planner.explain import headline
from planner.fit import FitResult
from planner.hardware import format_size
from planner.memory import DeviceUsage, MemoryPlan
from planner.offload import offload_place

SCHEMA = 1


def _config_json(plan: MemoryPlan) -> dict[str, Any]:
    r = plan.resolved
    c = r.config
    return {
        "n_gpu_layers": r.n_gpu_layers if plan.gpus else 0,
        "n_ctx": r.n_ctx,
        "n_batch": r.n_batch,
        "n_ubatch": r.n_ubatch,
        "type_k": r.type_k.name,
        "type_v": r.type_v.name,
        "flash_attn": c.flash_attn,
        "swa_full": c.swa_full,
        "n_seq_max": r.n_seq_max,
        "tensor_split": list(c.tensor_split) or [1.0],
        "kv_unified": c.kv_unified,
        "op_offload": c.op_offload,
        "n_cpu_moe": c.n_cpu_moe,
        "use_mmap": c.use_mmap,
        "cpu_extra_buffers": c.cpu_extra_buffers,  # None: this CPU's default (--repack)
    }


def _device_json(d: DeviceUsage) -> dict[str, Any]:
    return (
        {
            "name": d.name,
            "kind": "gpu",
            "backend": d.backend,
            "total": d.total,
            "free": d.free,
            "margin": d.margin,
            "weights": d.weights,
            "kv": d.kv,
            "recurrent": d.recurrent,
            "compute": d.compute,
            "overhead": d.overhead,
            "planned": d.planned,
            "layers": d.layers,
            "fits": d.fits,
        }
        | ({"endpoint": d.description, "remote_cpu": d.remote_cpu} if d.backend == "rpc" else {})
        | _overhead_json(d)
    )


def _overhead_json(d: DeviceUsage) -> dict[str, Any]:
    """The overhead's parts and basis: derived from the device, fitted, learned on this machine, or an estimate."""
    o = d.overhead_detail
    if o is None:
        return {}
    return {
        "overhead_detail": {
            "context": o.context,
            "runtime": o.runtime,
            "paging": d.overhead - o.total,
            "parts": dict(o.parts),
            "source": o.source,
            "learned": o.source.startswith("learned"),
            "estimate": o.estimate,
        }
    }


def _host_json(d: DeviceUsage) -> dict[str, Any]:
    return {
        "total": d.total,
        "free": d.free,
        "margin": d.margin,
        "weights": d.weights,
        "weights_mapped": d.weights_mapped,
        "kv": d.kv,
        "recurrent": d.recurrent,
        "output": d.output,
        "compute": d.compute,
        "overhead": d.overhead,
        "planned": d.planned,
        "fits": d.fits,
    }


def _ops_on_cpu_json(plan: MemoryPlan) -> dict[str, Any] | None:
    """The model's ops on the CPU because a device refused them, and their cost (planner.op_support.OpsOnCpu)."""
    found = plan.ops_on_cpu
    if found is None:
        return None
    return {
        "ops": [{"op": op, "refused_by": device, "nodes": n} for op, device, n in found.ops],
        "splits": found.splits,
        "splits_if_on_device": found.splits_on_device,
        "host_compute_bytes": found.host_compute,
        "device_compute_bytes": dict(found.device_compute),
    }


def plan_to_json(result: FitResult) -> dict[str, Any]:
    plan = result.plan
    m = plan.model
    return {
        "schema": SCHEMA,
        "llama_cpp_build": LLAMA_CPP_BUILD,
        "model": {
            "path": m.path,
            "architecture": m.architecture,
            "name": m.name,
            "n_layer": m.n_layer,
            "n_ctx_train": m.n_ctx_train,
            "n_vocab": m.n_vocab,
            "n_params": m.n_params,
            "file_bytes": m.file_bytes,
            "n_embd": m.n_embd,
            "quantization": m.quantization,
            "exact": m.exact,
        },
        "config": _config_json(plan),
        "verdict": plan.verdict,
        "verdict_words": verdict_words(plan.verdict, plan),
        "solved": result.solved,
        "devices": [_device_json(d) for d in plan.gpus],
        "host": _host_json(plan.host),
        "buffers": [
            {"device": b.device, "kind": b.kind, "name": b.name, "bytes": b.bytes, "mapped": b.mapped}
            for b in plan.buffers
        ],
        "reasons": list(result.reasons),
        "estimates": list(plan.estimates),
        "ops_on_cpu": _ops_on_cpu_json(plan),
        "alternatives": [
            {
                "config": _config_json(a.plan),
                "verdict": a.plan.verdict,
                "note": a.note,
                "devices": [{"name": d.name, "planned": d.planned} for d in a.plan.gpus],
                "host": {"planned": a.plan.host.planned},
            }
            for a in result.alternatives
        ],
    }


_VERDICT_WORDS = {
    "full_gpu": "FITS: every layer on the GPU",
    "partial_gpu": "FITS: partly on the GPU",
    "cpu_only": "FITS: CPU only",
    "no_fit": "DOES NOT FIT",
}


def verdict_words(verdict: str, plan: MemoryPlan | None = None) -> str:
    """The verdict in words; given the plan, the offloaded layers' devices are named where a remote CPU
    holds them ("FITS: every layer on RPC0 (a remote CPU)"), never called the GPU."""
    lent = offload_place(plan) if plan is not None else ""
    if lent and verdict == "full_gpu":
        return f"FITS: every layer on {lent}"
    if lent and verdict == "partial_gpu":
        return f"FITS: partly on {lent}"
    return _VERDICT_WORDS.get(verdict, verdict)


def projector_share(plan: MemoryPlan) -> str:
    """The vision projector's part of the plan, in words: its buffers, where, and the largest image."""
    p = plan.projector
    if p is None:
        return ""
    weights = sum(b.bytes for b in plan.buffers if b.kind == "projector_weights")
    compute = sum(b.bytes for b in plan.buffers if b.kind == "projector_compute")
    where = next((b.device for b in plan.buffers if b.kind == "projector_weights"), "CPU")
    name = p.path.replace("\\", "/").rsplit("/", 1)[-1]
    text = (
        f"{name}: {format_size(weights)} weights and {format_size(compute)} compute on "
        f"{'host RAM' if where == 'CPU' else where}"
    )
    from planner.projectors import rule_for

    if p.has_vision and rule_for(p.projector_type) is not None:
        from planner.projectors.compute import largest_images

        nx, ny = max(largest_images(p, p.image_max_tokens), key=lambda im: im[0] * im[1])
        text += f", for images up to {nx}×{ny} pixels"
    return text


def plan_to_table(result: FitResult) -> str:
    plan = result.plan
    m, r = plan.model, plan.resolved
    lent = offload_place(plan)
    lines = [
        # llama.cpp's GPU layers count the output layer too: 18 layers are "0/19 layers on GPU" below
        f"{m.name}  ({m.architecture}, {m.n_layer} layers + the output layer, {m.quantization}, "
        f"{format_size(m.file_bytes)} on disk)",
        f"{m.path}",
        "",
        f"Verdict: {verdict_words(plan.verdict, plan)} · {headline(plan)}",
        "",
        "Settings",
        f"  {'offloaded' if lent else 'GPU layers':<15} {r.n_gpu_layers if plan.gpus else 0} of {m.n_layer + 1} "
        f"(output layer included){f', to {lent}' if lent else ''}",
        f"  context         {r.n_ctx:,} tokens (trained {m.n_ctx_train:,})",
        f"  KV cache        K {r.type_k.name}, V {r.type_v.name}"
        if plan.kv.tensors
        else "  KV cache        none (this architecture keeps none)",
        f"  flash attention {'on' if r.config.flash_attn else 'off'}",
        f"  batch / ubatch  {r.n_batch} / {r.n_ubatch}",
    ]
    if m.has_swa:
        lines.append(
            f"  sliding window  {m.n_swa} tokens, "
            f"{'full-size' if r.config.swa_full else 'window-sized'} SWA cache ({plan.kv.cells_swa:,} cells)"
        )
    cols = ("weights", "kv", "compute", "other", "planned", "margin", "free", "spare")
    header = f"  {'device':<10}" + "".join(f"{c:>11}" for c in cols)
    lines += ["", "Memory", header]

    def row(name: str, d: DeviceUsage, other: int) -> str:
        vals = (
            d.weights + d.weights_mapped,
            d.kv + d.recurrent,
            d.compute,
            other,
            d.planned,
            d.margin,
            d.free,
            d.headroom,
        )
        cells = "".join(f" {format_size(v):>10}" for v in vals)  # a space between cells, even for a wide figure
        flag = "" if d.fits else "  <-- over"
        return f"  {name:<10}{cells}{flag}"

    for d in plan.gpus:
        lines.append(row(d.name, d, d.overhead))
    lines.append(row("host RAM", plan.host, plan.host.output + plan.host.overhead))
    if plan.host.weights_mapped:
        lines.append(f"  (host weights include {format_size(plan.host.weights_mapped)} memory-mapped from the file)")
    if plan.projector is not None:
        lines.append(f"  (of which the vision projector {projector_share(plan)})")
    if plan.ops_on_cpu is not None:
        found = plan.ops_on_cpu
        names = ", ".join(f"{op} x{n}" for op, _, n in found.ops)
        lines.append(
            f"  (ops on the CPU, refused by {', '.join(sorted({d for _, d, _ in found.ops}))}: {names}; "
            f"{found.splits} graph splits instead of {found.splits_on_device})"
        )
    lines += ["", "Why"]
    lines += [f"  - {reason}" for reason in result.reasons]
    if result.alternatives:
        lines += ["", "Alternatives that also fit"]
        for alt in result.alternatives:
            lines.append(f"  - {alt.note} ({verdict_words(alt.plan.verdict, alt.plan).split(': ')[-1]})")
    if plan.estimates:
        lines += ["", "Estimates (not derived exactly)"]
        lines += [f"  - {e}" for e in plan.estimates]
    return "\n".join(lines)
